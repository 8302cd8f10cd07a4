"""The avatar on screen: a QOpenGLWidget that pulls one mouth frame per display tick.

Each tick predicts when the frame it renders will be seen, asks the media clock what
will be heard then, and takes exactly that frame from the slots the producer keeps
filled. A frame that is not there is not waited for: the tick shows a fallback (the
neighbours' midpoint, or the last frame held) and counts it late. Every tick is
logged, so lip-sync can be checked frame by frame after the fact.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QImage, QSurfaceFormat
from PySide6.QtOpenGLWidgets import QOpenGLWidget

from pipeline.core.frames import MouthPose
from render.gl.sprite_renderer import GLRenderer
from render.rigs.loader import AvatarRig, renderer_for
from render.timing import idle_motion
from render.timing.display_clock import VSYNC, DisplayClock
from render.timing.frame_producer import FrameProducer, MediaClock, PoseSource
from render.timing.frame_slots import FrameSlots, midway

PRESENTED = 0
LATE_HELD = 1
LATE_INTERPOLATED = 2

LOG_DTYPE = np.dtype([
    ("tick", "f8"),         # monotonic time the tick ran
    ("predicted", "f8"),    # monotonic time the frame is predicted to be on screen
    ("heard", "f8"),        # media time heard at that instant
    ("stamp", "f8"),        # media time the shown frame was made for (middle of its span)
    ("viseme", "i2"),       # dominant viseme shown
    ("mix", "f4"),
    ("openness", "f4"),
    ("status", "i1"),       # PRESENTED / LATE_HELD / LATE_INTERPOLATED
])

REST = MouthPose(0, 0, 0.0, 0.0)
# If vsync swaps stop coming (window hidden, minimised), ticks must not stop with them.
_VSYNC_WATCHDOG_PERIODS = 4


class AvatarView(QOpenGLWidget):
    """Renders a rig, its mouth pulled from frame slots on the display tick."""

    def __init__(self, parent=None, *, fps: float = 60.0,
                 clear_color: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
                 slot_count: int = 30, lookahead: float = 0.2, seed: int = 0,
                 log_rows: int = 36_000, now: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parent)
        fmt = QSurfaceFormat()
        fmt.setVersion(3, 3)
        fmt.setProfile(QSurfaceFormat.OpenGLContextProfile.CoreProfile)
        fmt.setAlphaBufferSize(8)
        fmt.setSwapInterval(1)
        self.setFormat(fmt)
        self.period = 1.0 / fps
        self.seed = seed
        self.lookahead = lookahead
        self._now = now
        self.slots = FrameSlots(slot_count, self.period)
        self.clock = DisplayClock(self.period, now)
        self.renderer = GLRenderer(clear_color)
        self.producer: FrameProducer | None = None
        self._media_time_at: MediaClock | None = None
        self._rig: AvatarRig | None = None
        self._rig_pending = False
        self._gl_ready = False
        self._pose = REST
        self._stamp = math.nan
        self._blink = 0.0
        self._breath = 0.0
        self._blinking = True
        self._breathing = True
        self._log = np.zeros(log_rows, dtype=LOG_DTYPE)
        self._log_count = 0
        self._tick_times = np.zeros(120, dtype=np.float64)
        self._ticks = 0
        self._draw_seconds = np.zeros(600, dtype=np.float64)
        self._draws = 0
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._on_timer)
        self.frameSwapped.connect(self._on_swapped)

    # -- public API ---------------------------------------------------------------

    def set_rig(self, rig: AvatarRig) -> None:
        """Show `rig` (a sprite or a photo rig); its images are uploaded now if GL is up,
        else at initialisation."""
        self._rig = rig
        self._rig_pending = True
        if self._gl_ready:
            self.makeCurrent()
            self._upload_rig()
            self.doneCurrent()
            self.update()

    def set_sources(self, pose_source: PoseSource | None,
                    media_time_at: MediaClock | None,
                    source_version: Callable[[], int] | None = None) -> None:
        """Pull frames made by `pose_source` at the times `media_time_at` says are heard.
        `source_version` changes whenever the source's answers may have changed, so frames
        made ahead are made again. None for a source or clock leaves the avatar idle
        (rest mouth, blinking, breathing)."""
        self._stop_producer()
        self.slots.invalidate()
        self._media_time_at = media_time_at if pose_source is not None else None
        if self._media_time_at is None:
            return
        self.slots.align(self._media_time_at(self.clock.next_presentation()))
        self.producer = FrameProducer(self.slots, pose_source, self._media_time_at,
                                      lookahead=self.lookahead, source_version=source_version,
                                      clock=self._now)
        self.producer.start()

    def set_idle_motion(self, blinking: bool = True, breathing: bool = True) -> None:
        """Switch blinking and breathing on or off (both on by default)."""
        self._blinking = blinking
        self._breathing = breathing

    def set_clear_color(self, color: tuple[float, float, float, float]) -> None:
        """Background as straight RGBA in 0..1; alpha 0 is transparent."""
        self.renderer.clear_color = color
        self.update()

    def stats(self) -> dict:
        """Counters and timing: what a settings panel or a test wants to know."""
        draws = self._draw_seconds[: min(self._draws, len(self._draw_seconds))] * 1e3
        draw_p50, draw_p99 = np.percentile(draws, (50, 99)) if len(draws) else (0.0, 0.0)
        stats = {
            **self.slots.counters(),
            "tick_jitter_ms": self.clock.jitter(),
            "display_mode": "probing" if self.clock.probing else self.clock.mode,
            "fps": self._measured_fps(),
            "missed_ticks": self.clock.missed,
            "swap_latency_ms": self.clock.latency_ms(),
            "draw_ms": {"p50": float(draw_p50), "p99": float(draw_p99)},
        }
        if self.producer is not None:
            stats["producer"] = self.producer.stats()
        return stats

    def presentation_log(self) -> np.ndarray:
        """A copy of the logged ticks, oldest first (the newest `log_rows` of them)."""
        rows = len(self._log)
        if self._log_count <= rows:
            return self._log[: self._log_count].copy()
        start = self._log_count % rows
        return np.concatenate((self._log[start:], self._log[:start]))

    def grab(self) -> QImage:
        """A screenshot of the avatar as rendered (alpha included)."""
        return self.grabFramebuffer()

    def shutdown(self) -> None:
        """Stop ticking and producing; GL objects go with the context."""
        self._timer.stop()
        self._stop_producer()

    # -- GL -----------------------------------------------------------------------

    def initializeGL(self) -> None:
        self.renderer.initialize()
        self.context().aboutToBeDestroyed.connect(self._release_gl)
        self._gl_ready = True
        if self._rig_pending:
            self._upload_rig()

    def resizeGL(self, width: int, height: int) -> None:
        ratio = self.devicePixelRatioF()
        self.renderer.resize(round(width * ratio), round(height * ratio))

    def paintGL(self) -> None:
        started = time.perf_counter()
        self.renderer.draw(self._pose, self._blink, self._breath)
        self._draw_seconds[self._draws % len(self._draw_seconds)] = time.perf_counter() - started
        self._draws += 1

    def _upload_rig(self) -> None:
        fresh = renderer_for(self._rig, self.renderer.clear_color)
        if type(fresh) is not type(self.renderer):
            old, self.renderer = self.renderer, fresh
            old.release()
            fresh.initialize()
            fresh.resize(*old.viewport)
        self.renderer.set_rig(self._rig)
        self._rig_pending = False

    def _release_gl(self) -> None:
        self.makeCurrent()
        self.renderer.release()
        self.doneCurrent()
        self._gl_ready = False
        self._rig_pending = self._rig is not None

    # -- ticking ------------------------------------------------------------------

    def _on_swapped(self) -> None:
        t = self._now()
        clock = self.clock
        decided = clock.on_swap(t)
        if clock.probing:
            # Free-running swaps tell whether they block on vsync; the frames shown
            # meanwhile are real but not counted, their rate says nothing about ours.
            clock.on_tick(t)
            self._present(t, counted=False)
            return
        if decided is not None:
            # First paced tick: nothing has lined the frames up with it yet.
            self._align_next()
        if clock.mode == VSYNC:
            clock.on_tick(t)
            self._present(t, counted=True)
            self._timer.start(math.ceil(_VSYNC_WATCHDOG_PERIODS * self.period * 1e3))
            return
        if decided is None:
            # The swap refined the latency estimate: line up with the next tick again.
            self._align_next()
        else:
            self._arm()

    def _on_timer(self) -> None:
        t = self._now()
        clock = self.clock
        if clock.mode == VSYNC:
            clock.fall_back_to_deadline(t)
            self._align_next()
            self._arm()
            return
        clock.on_tick(t)
        self._present(t, counted=True)
        self._arm()

    def _arm(self) -> None:
        # Whole milliseconds only (QTimer); rounding to nearest keeps the tick centred
        # on its deadline. The prediction uses the grid time, not the tick's.
        delay = self.clock.next_deadline() - self._now()
        self._timer.start(max(0, round(delay * 1e3)))

    def _align_next(self) -> None:
        """Line frame spans up with the next tick now, a period before it needs its frame,
        so a re-phase never makes that tick late."""
        if self._media_time_at is not None:
            self.slots.align(self._media_time_at(self.clock.next_presentation()))

    def _present(self, t: float, counted: bool) -> None:
        if counted:
            self._tick_times[self._ticks % len(self._tick_times)] = t
            self._ticks += 1
        predicted = self.clock.predicted_presentation()
        self._blink = idle_motion.blink(predicted, self.seed) if self._blinking else 0.0
        self._breath = idle_motion.breathing(predicted, self.seed) if self._breathing else 0.0
        media_time_at = self._media_time_at
        if media_time_at is None:
            self.update()
            return
        slots = self.slots
        heard = media_time_at(predicted)
        k = slots.frame_index(heard + 0.5 * self.period)
        pose = slots.take(k)
        status = PRESENTED
        stamp = slots.taken_stamp
        if pose is None:
            before, after = slots.take(k - 1), slots.take(k + 1)
            if before is not None and after is not None:
                pose, status = midway(before, after), LATE_INTERPOLATED
                stamp = slots.frame_start(k) + 0.5 * self.period
            else:
                pose, status, stamp = self._pose, LATE_HELD, self._stamp
        self._pose, self._stamp = pose, stamp
        if counted:
            if status == PRESENTED:
                slots.presented += 1
            else:
                slots.late += 1
                slots.fallback += 1
            self._log[self._log_count % len(self._log)] = (
                t, predicted, heard, stamp, pose.dominant, pose.mix, pose.openness, status)
            self._log_count += 1
            self._align_next()
        self.update()

    def _measured_fps(self) -> float:
        """Display ticks per second over the last (up to) 120 paced ticks."""
        ring = len(self._tick_times)
        n = min(self._ticks, ring)
        if n < 2:
            return 0.0
        span = self._tick_times[(self._ticks - 1) % ring] - self._tick_times[(self._ticks - n) % ring]
        return float((n - 1) / span) if span > 0 else 0.0

    def _stop_producer(self) -> None:
        if self.producer is not None:
            self.producer.stop()
            self.producer = None
