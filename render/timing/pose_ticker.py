"""A presenter on a timer: at each tick, the whole avatar (AvatarFrame) for what is heard
when that tick's output is seen, with no pixels.

The pose half of every pulled output. A pixel output (render/outputs/frame_feed.py) draws
each frame it gets and reads it back; a pose output (VMC, VTube Studio) sends the frame's
state to another app. Either way the ticker only predicts and takes: the presenter knows
when the frame will be seen (the tick, plus how long the output takes to show it, told
through `delivered`), asks the media clock what is heard then, and takes that frame from
its slots.

Two ways to drive it: `step(t)` from someone else's timer (the frame feed's Qt timer on
the GUI thread, a test's injected clock), or `start()`, which steps it on a thread of its
own and hands each frame to `sinks` there (pose outputs, which touch no GL).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from render.timing.frame_producer import MediaClock, PoseSource
from render.timing.presenter import AvatarFrame, Presenter

log = logging.getLogger(__name__)

FrameSink = Callable[[AvatarFrame], None]


class PoseTicker:
    """Ticks `fps` times a second on deadlines (no display to pace it). `latency_s` is how
    long after its hand-over a frame is seen (a pose output's user offset: the other
    app's render delay, which we cannot measure); it is added to every delivery.

    Invariant: on its own thread, a sink that raises is logged and dropped, the others
    still get every frame; the thread never waits for anything but the next deadline."""

    def __init__(self, fps: float, *, now: Callable[[], float] = time.monotonic,
                 latency_s: float = 0.0, name: str = "pose-ticker") -> None:
        self.presenter = Presenter(fps, now=now)
        self.latency_s = latency_s
        self.sinks: list[FrameSink] = []
        self._now = now
        self._name = name
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.presenter.clock.fall_back_to_deadline(now())
        self.presenter.clock.assume_latency(latency_s)

    @property
    def period(self) -> float:
        return self.presenter.period

    def set_sources(self, pose_source: PoseSource | None, media_time_at: MediaClock | None,
                    source_version: Callable[[], int] | None = None) -> None:
        self.presenter.set_sources(pose_source, media_time_at, source_version)

    def set_idle_motion(self, blinking: bool = True, breathing: bool = True) -> None:
        self.presenter.set_idle_motion(blinking, breathing)

    def set_avatar_motion(self, motion) -> None:
        self.presenter.set_avatar_motion(motion)

    def step(self, t: float) -> tuple[AvatarFrame | None, float]:
        """The timer fired at monotonic time `t`: the frame to hand over now (None: not
        yet) and the seconds until the next step."""
        pacing = self.presenter.timer_fired(t)
        wake = pacing.wake_in if pacing.wake_in is not None else self.period
        return pacing.frame, wake

    def delivered(self, t: float) -> None:
        """The last frame was handed over at monotonic time `t`: it is seen `latency_s`
        later, which the presenter learns as that tick's presentation."""
        self.presenter.clock.on_swap(t + self.latency_s)

    # -- a thread of its own ------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("PoseTicker.start() called twice")
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop ticking and producing; safe to call twice."""
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self.presenter.shutdown()

    def stats(self) -> dict:
        return self.presenter.stats()

    def _run(self) -> None:
        clock = self.presenter.clock
        clock.fall_back_to_deadline(self._now())
        wake = clock.next_deadline() - self._now()  # the grid's first point
        while not self._stopping.wait(max(0.0, wake)):
            frame, wake = self.step(self._now())
            if frame is None:
                continue
            for sink in list(self.sinks):
                try:
                    sink(frame)
                except Exception:  # one broken output must not stop the others
                    log.exception("a pose sink failed; it gets no more frames")
                    self.sinks.remove(sink)
            self.delivered(self._now())
