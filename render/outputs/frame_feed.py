"""The pixel stage of the outputs that need pixels on the CPU (the browser source's page,
the virtual camera): the avatar drawn offscreen and read back, frame by frame.

Its frames come from a pose ticker of its own (render/timing/pose_ticker.py: a presenter
pulling from the engine's media clock), stepped here by a Qt timer on the GUI thread,
where the GL context is. Frames are read back asynchronously (render/gl/readback.py): a
frame drawn at one tick is read back and reaches the sinks at the next, so its
presentation is a period after its tick, and the ticker is told so (each delivery counts
as the frame's "swap"), so it makes frames for the media time heard when they are
delivered.

Sinks are called on the GUI thread with (pixels, media_time): H×W×4 uint8 premultiplied
RGBA, top row first, valid only during the call (a sink keeps a copy, not the view).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

import numpy as np
from OpenGL import GL
from PySide6.QtCore import QObject, Qt, QTimer

from render.gl.offscreen import offscreen_target, renders_on_cpu
from render.gl.readback import AsyncReadback
from render.gl.sprite_renderer import SpriteGLRenderer
from render.gpu.path_picker import MouthPathPicker
from render.rigs.loader import AvatarRig
from render.timing.frame_producer import MediaClock, PoseSource
from render.timing.pose_ticker import PoseTicker
from render.timing.presenter import AvatarFrame, Presenter

log = logging.getLogger(__name__)

Sink = Callable[[np.ndarray, float], None]


class FrameFeed(QObject):
    """Draws the avatar at width×height on a transparent background `fps` times a second
    and hands each frame to every sink. start() begins ticking, stop() ends it and frees
    the GL objects. A sink that raises is logged and dropped (the feed goes on).
    `readback` makes the feed's readback (AsyncReadback's calls); RGBA by default.
    `request_with_draw` says when a frame's readback is queued (_tick says why): right
    after its drawing, or at the next tick; None picks by the GL, the first on a GPU.
    `mouth_paths` (the app's one picker) chooses the renderer's mouth-frame path for each
    rig at the feed's size (AvatarSurface's); OpenGL's without one."""

    def __init__(self, width: int, height: int, fps: float, *,
                 now: Callable[[], float] = time.monotonic,
                 readback: Callable[[], object] | None = None,
                 request_with_draw: bool | None = None,
                 mouth_paths: MouthPathPicker | None = None) -> None:
        super().__init__()
        self.width, self.height = width, height
        self.ticker = PoseTicker(fps, now=now)
        self._now = now
        self._target = offscreen_target(width, height)
        self.renderer = SpriteGLRenderer((0.0, 0.0, 0.0, 0.0))
        self.renderer.initialize()
        self.renderer.resize(width, height)
        self._paths = mouth_paths or MouthPathPicker()
        # The sinks' own readback where they want another format (the virtual camera's
        # YUYV, packed on the GPU), made here with the feed's context current.
        self._readback = readback() if readback is not None else AsyncReadback(width, height)
        self.request_with_draw = (not renders_on_cpu(self._target.renderer)
                                  if request_with_draw is None else request_with_draw)
        self.sinks: list[Sink] = []
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._tick)
        self.delivered = 0
        # The media time of the frame drawn last and not yet read back.
        self._undelivered: float | None = None
        self._draw_seconds = np.zeros(600, dtype=np.float64)
        self._draws = 0

    @property
    def presenter(self) -> Presenter:
        return self.ticker.presenter

    @property
    def extra_latency_s(self) -> float:
        """How long after delivery the viewers see a frame (the page's measured paint
        delay): added to the presentation the ticker learns, so frames are made for what
        is heard when they are seen, not when they are handed over."""
        return self.ticker.latency_s

    @extra_latency_s.setter
    def extra_latency_s(self, seconds: float) -> None:
        self.ticker.latency_s = seconds

    def set_rig(self, rig: AvatarRig) -> None:
        self._target.make_current()
        self.renderer = self._paths.show(self.renderer, rig, (self.width, self.height), self)

    def set_sources(self, pose_source: PoseSource | None, media_time_at: MediaClock | None,
                    source_version: Callable[[], int] | None = None) -> None:
        self.ticker.set_sources(pose_source, media_time_at, source_version)

    def set_idle_motion(self, blinking: bool = True, breathing: bool = True) -> None:
        self.ticker.set_idle_motion(blinking, breathing)

    def set_avatar_motion(self, motion) -> None:
        self.ticker.set_avatar_motion(motion)

    def start(self) -> None:
        # No buffer swaps offscreen: ticks are paced by deadlines from the start.
        self.presenter.clock.fall_back_to_deadline(self._now())
        self._timer.start(0)

    def stop(self) -> None:
        self._timer.stop()
        self.ticker.stop()
        self._paths.forget(self)
        self._target.make_current()
        self._readback.release()
        self.renderer.release()
        self._target.close()

    def stats(self) -> dict:
        draws = self._draw_seconds[: min(self._draws, len(self._draw_seconds))] * 1e3
        draw_p50, draw_p99 = np.percentile(draws, (50, 99)) if len(draws) else (0.0, 0.0)
        return {**self.presenter.stats(), "delivered": self.delivered,
                "readback": self._readback.stats(),
                "draw_ms": {"p50": float(draw_p50), "p99": float(draw_p99)}}

    def _tick(self) -> None:
        """Hand over the previous tick's frame, then draw this tick's. Its delivery comes
        before this tick is taken, so the display clock counts it as the previous tick's
        presentation.

        When the frame's readback is queued depends on what draws it. On a GPU, right
        after its drawing, in the same flush: its bytes are on the host long before the
        next tick collects them. Queued at the next tick instead, a GPU has not finished
        the copy when the feed collects right after, so the frame waits for the tick
        after: on the H200 all frames took 2 ticks from draw to host that way and 1 tick
        this way, at the same cost on the tick (bench/results/yuv_readback_h200.json,
        feed_orders). The newest finished frame is taken (collect_newest), so a frame
        that was late once does not make every later one late too.
        On a CPU rasteriser (llvmpipe) a read queued right after drawing waits for that
        drawing to finish, 13 ms a tick at 1280x720 against 3.1 ms when the frame, still
        in the framebuffer, is read at the next tick (bench/results/readback.json, its
        deferred order), and llvmpipe copies it there and then, so it still comes at the
        next tick."""
        self._target.make_current()
        if self._undelivered is not None:
            self._target.bind()
            self._readback.request(self._undelivered)
            self._undelivered = None
        got = self._readback.collect_newest()
        if got is not None:
            # The previous tick's frame reaches its viewers now: its "swap".
            self.ticker.delivered(self._now())
            self._deliver(*got)
        frame, wake_in = self.ticker.step(self._now())
        if frame is not None:
            self._draw(frame)
        self._timer.start(max(0, round(wake_in * 1e3)))

    def _draw(self, frame: AvatarFrame) -> None:
        started = time.perf_counter()
        self._target.bind()
        self.renderer.draw_state(frame.state, 1.0 - frame.state.hidden)
        heard = frame.heard if not math.isnan(frame.heard) else frame.stamp
        if self.request_with_draw:
            self._readback.request(heard)  # flushes the drawing and the copy together
        else:
            GL.glFlush()  # rasterise while the tick goes on; read back at the next one
            self._undelivered = heard
        self._draw_seconds[self._draws % len(self._draw_seconds)] = time.perf_counter() - started
        self._draws += 1

    def _deliver(self, pixels: np.ndarray, media_time: float) -> None:
        self.delivered += 1
        for sink in list(self.sinks):
            try:
                sink(pixels, media_time)
            except Exception:  # one broken output must not stop the others
                log.exception("a frame sink failed; it gets no more frames")
                self.sinks.remove(sink)
