"""An output that needs the avatar's pixels on the CPU: a frame feed (render/outputs/
frame_feed.py) drawing for one sink, behind the output contract (contract.py).

The browser source and the virtual camera are each one of these; they differ only in
their sink. A sink has one shape:

- ``start()`` (raises its own error, with a message for the user, when it cannot run),
- ``send(pixels, media_time)``: a frame, returned at once (sinks copy what they keep),
- ``stats() -> dict``, ``stop()``;
- optionally ``readback()`` (the feed reads its frames back in the sink's own format:
  the camera's YUYV), ``set_caption(text)`` (it shows captions), and
  ``viewer_delay_s()`` (how long after ``send`` its viewers see a frame, measured: the
  pages' paint delay), which the feed then adds to each frame's presentation, reviewed
  every VIEWER_DELAY_REVIEW_MS.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, is_dataclass

from PySide6.QtCore import QTimer

from render.gpu.path_picker import MouthPathPicker
from render.outputs.contract import OutputStatus
from render.outputs.frame_feed import FrameFeed
from render.timing.frame_producer import MediaClock, PoseSource

# How often the feed takes up the viewers' measured delay: it moves with the machine's
# load over seconds, not frame to frame.
VIEWER_DELAY_REVIEW_MS = 1000


class PixelOutput:
    """`sink` started already; `describe(sink)` gives the status line's detail. The feed
    draws at width×height, `fps` times a second, from start on, its mouth frames on the
    path `mouth_paths` chooses (FrameFeed); close() stops the feed, then the sink."""

    def __init__(self, name: str, sink, width: int, height: int, fps: float, *,
                 describe: Callable[[object], str],
                 now: Callable[[], float] = time.monotonic,
                 mouth_paths: MouthPathPicker | None = None) -> None:
        self.name = name
        self.sink = sink
        self._describe = describe
        readback = getattr(sink, "readback", None)
        self.feed = FrameFeed(width, height, fps, now=now, readback=readback,
                              mouth_paths=mouth_paths)
        self.feed.sinks.append(sink.send)
        # Whether its viewers see captions (the page does, a camera not).
        self.shows_captions = hasattr(sink, "set_caption")
        self._delay_timer: QTimer | None = None
        if hasattr(sink, "viewer_delay_s"):
            self._delay_timer = QTimer()
            self._delay_timer.timeout.connect(self._follow_viewer_delay)
            self._delay_timer.start(VIEWER_DELAY_REVIEW_MS)

    @property
    def presenter(self):
        return self.feed.presenter

    @property
    def size(self) -> tuple[int, int]:
        return self.feed.width, self.feed.height

    def start(self) -> None:
        self.feed.start()

    def set_sources(self, pose_source: PoseSource | None, media_time_at: MediaClock | None,
                    source_version: Callable[[], int] | None = None) -> None:
        self.feed.set_sources(pose_source, media_time_at, source_version)

    def set_rig(self, rig) -> None:
        self.feed.set_rig(rig)

    def set_idle_motion(self, blinking: bool = True, breathing: bool = True) -> None:
        self.feed.set_idle_motion(blinking, breathing)

    def set_avatar_motion(self, motion) -> None:
        self.feed.set_avatar_motion(motion)

    def set_caption(self, text: str) -> None:
        if self.shows_captions:
            self.sink.set_caption(text)

    def status(self) -> OutputStatus:
        stats = self.sink.stats()
        stats = asdict(stats) if is_dataclass(stats) else stats
        problem = stats.get("error")
        # No page connected yet is no trouble: the detail says how many are.
        state = "trouble" if problem else "on"
        return OutputStatus(self.name, state, self._describe(self.sink), problem,
                            {"sink": stats, "feed": self.feed.stats()})

    def close(self) -> None:
        if self._delay_timer is not None:
            self._delay_timer.stop()
        self.feed.stop()
        self.sink.stop()

    def _follow_viewer_delay(self) -> None:
        delay = self.sink.viewer_delay_s()
        if delay is not None:
            self.feed.extra_latency_s = delay

