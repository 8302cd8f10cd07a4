"""What the avatar shows at each display tick, for any output that pulls frames.

The presenter owns the frame slots, the producer that keeps them filled and the display
clock. At each tick it predicts when the frame being made will be seen, asks the media
clock what will be heard then, and takes exactly that frame from the slots. A frame that
is not there is not waited for: the tick gets a stand-in (the neighbours' midpoint, or
the last frame held) and counts it late. Every counted tick is logged, so lip-sync can be
checked frame by frame after the fact.

It knows nothing of Qt or GL: an output hands it tick times (and, for a screen, its buffer
swaps) and draws the `AvatarFrame` it gets back. The clock is injected (`now`), so the
whole tick path runs in tests without sleeping.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pipeline.core.avatar_state import AvatarState, blend_into
from pipeline.core.frames import MouthPose
from render.timing import idle_motion
from render.timing.avatar_motion import AvatarMotion
from render.timing.display_clock import VSYNC, DisplayClock
from render.timing.frame_producer import FrameProducer, MediaClock, PoseSource
from render.timing.frame_slots import FrameSlots

PRESENTED = 0           # the frame made for the heard time
LATE_HELD = 1           # it was not ready: the last frame shown again
LATE_INTERPOLATED = 2   # it was not ready: the midpoint of its two neighbours
IDLE = 3                # no voice: the last mouth, with blinking and breathing

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
# The longest gap between ticks is kept per second of the monotonic clock for this many
# seconds: stats() reports the longest of the last minute, so a reader that looks at
# least once a minute (the soak, bench/soak.py, every 30 s) sees every gap once, and the
# app's start-up does not hide the gaps of later hours.
GAP_SECONDS = 60
# A stall: two or more due ticks in a row passed with no frame, the display frozen past
# the brief's overrun limit (a stage past 2 ticks, mechanism 4); a gap over 2.5 periods,
# half a period above two for the ticks' own lateness. One tick skipped now and then is
# counted in missed_ticks: on llvmpipe at 60 fps that happens with nothing else running
# (bench/results/app_cpu_vm_2core_epyc.json: the main window's view alone, 13-44 a
# 10 s while speaking, 8-18 idle).
STALL_PERIODS = 2.5
# If vsync swaps stop coming (window hidden, minimised), ticks must not stop with them.
_VSYNC_WATCHDOG_PERIODS = 4


@dataclass(frozen=True, slots=True)
class AvatarFrame:
    """What one tick shows: the whole avatar in `state`, and of it the mouth `pose`, the
    eyelids' `blink` (the more closed eye) and the body's `breath`, for rigs that draw
    those (snapshots: they stay valid). `state` is the presenter's own record, valid
    until its next present() (copy it to keep it).

    `stamp` is the media time the pose was made for (NaN before any voice frame was
    shown); `heard` the media time heard when the frame is on screen (NaN when idle);
    `degraded` says the producer made the pose on its cheaper path (an overrun)."""

    tick: float
    predicted: float
    heard: float
    stamp: float
    pose: MouthPose
    blink: float
    breath: float
    status: int
    degraded: bool
    state: AvatarState


class Pacing(NamedTuple):
    """A display surface's next step: draw `frame` now (None: nothing new to draw), and
    call `timer_fired` in `wake_in` seconds (None: leave the pending timer as it is)."""

    frame: AvatarFrame | None
    wake_in: float | None


class Presenter:
    """Frame slots, their producer and a display clock behind one `present(tick)` call.

    Invariants: `present` never waits for the producer (it takes what the slots hold);
    slots.presented + slots.late == the counted ticks with a voice == the rows logged
    (until the log ring wraps); slots.late == slots.held + slots.interpolated.
    """

    def __init__(self, fps: float = 60.0, *, slot_count: int = 30, lookahead: float = 0.2,
                 seed: int = 0, log_rows: int = 36_000,
                 now: Callable[[], float] = time.monotonic,
                 thread_time: Callable[[], float] = time.thread_time) -> None:
        self.period = 1.0 / fps
        self.seed = seed
        self.lookahead = lookahead
        self.now = now
        self.slots = FrameSlots(slot_count, self.period)
        self.clock = DisplayClock(self.period, now)
        self.producer: FrameProducer | None = None
        self._media_time_at: MediaClock | None = None
        # The state shown last, and scratch for the next one and a late frame's
        # neighbours: preallocated, the tick copies frames into them.
        self._shown = AvatarState()
        self._taken = AvatarState()
        self._before = AvatarState()
        self._after = AvatarState()
        self._stamp = math.nan
        self._degraded = False
        self._blinking = True
        self._breathing = True
        self.avatar_motion: AvatarMotion | None = None
        # Written through at once: calloc's zeros (np.zeros) are mapped only as rows are
        # first written, so the app's RSS climbed 1.5 MB per output until the log first
        # wrapped (~17 minutes at 36 ticks a second), which the hour's soak read as growth.
        self._log = np.empty(log_rows, dtype=LOG_DTYPE)
        self._log.view(np.uint8).fill(0)
        self._log_count = 0
        self._tick_times = np.zeros(120, dtype=np.float64)
        self._ticks = 0
        self._last_tick = math.inf
        self.longest_gap = 0.0
        self.stalls = 0
        # CPU time of the thread that ticks (`thread_time`, injected in tests) at its last
        # tick: a stall through which that thread was on a CPU for longer than a stall
        # is its own work's (busy_stalls), whatever else the machine was doing.
        self.thread_time = thread_time
        self._last_cpu = math.inf
        self.busy_stalls = 0
        self._gap_second = np.full(GAP_SECONDS, -1, dtype=np.int64)
        self._gap_longest = np.zeros(GAP_SECONDS, dtype=np.float64)

    # -- sources ------------------------------------------------------------------

    def set_sources(self, pose_source: PoseSource | None, media_time_at: MediaClock | None,
                    source_version: Callable[[], int] | None = None, *,
                    start: bool = True) -> None:
        """Pull frames made by `pose_source` at the times `media_time_at` says are heard.
        `source_version` changes whenever the source's answers may have changed, so frames
        made ahead are made again. None for a source or clock leaves the avatar idle.
        `start=False` leaves the producer's thread unstarted: the caller drives it with
        `producer.fill()` (tests, on their injected clock)."""
        self._stop_producer()
        self.slots.invalidate()
        self._media_time_at = media_time_at if pose_source is not None else None
        if self._media_time_at is None:
            return
        self.slots.align(self._media_time_at(self.clock.next_presentation()))
        source_version = source_version or (lambda: 0)

        def version() -> tuple[int, int]:
            # A new expression or strength makes the frames made ahead stale too.
            motion = self.avatar_motion
            return source_version(), (0 if motion is None else motion.version)

        self.producer = FrameProducer(self.slots, pose_source, self._media_time_at,
                                      lookahead=self.lookahead, source_version=version,
                                      motion=self._motion, clock=self.now)
        if start:
            self.producer.start()

    def set_idle_motion(self, blinking: bool = True, breathing: bool = True) -> None:
        """Switch blinking and breathing on or off (both on by default). Frames made
        ahead keep what they were made with: the change shows within the lookahead."""
        self._blinking = blinking
        self._breathing = breathing

    def set_avatar_motion(self, motion: AvatarMotion | None) -> None:
        """Draw motion and expressions from `motion` (shared by every presenter; None:
        none, the avatar still but for blinks and breathing)."""
        self.avatar_motion = motion

    def _motion(self, state: AvatarState, t: float, motion_t: float | None = None) -> None:
        """Idle motion at t, the avatar's motion at `motion_t` (its media time; t when
        None): frames are made for media times, an idle tick for a monotonic one."""
        idle_motion.apply(state, t, self.seed, blinking=self._blinking,
                          breathing_on=self._breathing)
        motion = self.avatar_motion
        if motion is not None:
            motion.apply(state, t if motion_t is None else motion_t)

    @property
    def degraded(self) -> bool:
        """The producer is in degraded mode: a frame took longer than two ticks to make,
        so for a while it makes cheaper ones rather than fall behind the display."""
        return self.producer is not None and self.producer.degraded

    # -- the tick -----------------------------------------------------------------

    def present(self, tick: float, counted: bool = True) -> AvatarFrame:
        """The frame for the tick that ran at monotonic time `tick` (the display clock has
        taken the tick already). Uncounted ticks (the clock's probe) show real frames but
        are neither counted nor logged."""
        if counted:
            self._tick_times[self._ticks % len(self._tick_times)] = tick
            self._ticks += 1
            self._note_gap(tick)
        predicted = self.clock.predicted_presentation()
        media_time_at = self._media_time_at
        shown = self._shown
        if media_time_at is None:
            # Idle: the last mouth, with blinking and breathing at the tick's own time, and
            # the avatar's motion at the media time it is seen at (the studio's clock runs
            # on where this presenter has none).
            motion = self.avatar_motion
            self._motion(shown, predicted,
                         None if motion is None else motion.media_now() + predicted - self.now())
            return self._frame(tick, predicted, math.nan, IDLE)
        slots = self.slots
        heard = media_time_at(predicted)
        k = slots.frame_index(heard + 0.5 * self.period)
        if slots.take_state(k, self._taken):
            status, self._stamp, self._degraded = PRESENTED, slots.taken_stamp, slots.taken_degraded
            self._shown, self._taken = self._taken, shown
        else:
            status = LATE_HELD  # unless both neighbours are there: the last frame, again
            if slots.take_state(k - 1, self._before):
                before_degraded = slots.taken_degraded
                if slots.take_state(k + 1, self._after):
                    blend_into(self._taken, self._before, self._after, 0.5)
                    status = LATE_INTERPOLATED
                    self._stamp = slots.frame_start(k) + 0.5 * self.period
                    self._degraded = before_degraded or slots.taken_degraded
                    self._shown, self._taken = self._taken, shown
        frame = self._frame(tick, predicted, heard, status)
        if counted:
            if status == PRESENTED:
                slots.presented += 1
            else:
                slots.late += 1
                if status == LATE_HELD:
                    slots.held += 1
                else:
                    slots.interpolated += 1
            if self._degraded:
                slots.degraded_shown += 1
            pose = frame.pose
            self._log[self._log_count % len(self._log)] = (
                tick, predicted, heard, self._stamp, pose.dominant, pose.mix, pose.openness, status)
            self._log_count += 1
            self._align_next()
        return frame

    def _note_gap(self, tick: float) -> None:
        """Count a stall (and whether its thread was busy through it); keep the longest gap
        between counted ticks, overall and in `tick`'s second."""
        gap = tick - self._last_tick
        self._last_tick = tick
        cpu = self.thread_time()
        used = cpu - self._last_cpu
        self._last_cpu = cpu
        if gap > self.longest_gap:
            self.longest_gap = gap
        limit = STALL_PERIODS * self.period
        if gap > limit:
            self.stalls += 1
            if used > limit:
                self.busy_stalls += 1
        second = math.floor(tick)
        bucket = second % GAP_SECONDS
        if self._gap_second[bucket] != second:
            self._gap_second[bucket] = second
            self._gap_longest[bucket] = 0.0
        if gap > self._gap_longest[bucket]:
            self._gap_longest[bucket] = gap

    def longest_recent_gap(self) -> float:
        """The longest gap between counted ticks in the last GAP_SECONDS seconds."""
        recent = self._gap_second > math.floor(self.now()) - GAP_SECONDS
        return float(self._gap_longest[recent].max()) if recent.any() else 0.0

    def _frame(self, tick: float, predicted: float, heard: float, status: int) -> AvatarFrame:
        shown = self._shown
        return AvatarFrame(tick, predicted, heard, self._stamp, shown.mouth_pose(),
                           shown.eyes_closed, shown.breath, status, self._degraded, shown)

    # -- pacing for a display surface -----------------------------------------------

    def swapped(self, t: float) -> Pacing:
        """A buffer swap of the surface completed at monotonic time t."""
        clock = self.clock
        decided = clock.on_swap(t)
        if clock.probing:
            # Free-running swaps tell whether they block on vsync; the frames shown
            # meanwhile are real but not counted, their rate says nothing about ours.
            clock.on_tick(t)
            return Pacing(self.present(t, counted=False), None)
        if decided is not None:
            # First paced tick: nothing has lined the frames up with it yet.
            self._align_next()
        if clock.mode == VSYNC:
            clock.on_tick(t)
            return Pacing(self.present(t), _VSYNC_WATCHDOG_PERIODS * self.period)
        if decided is None:
            # The swap refined the latency estimate: line up with the next tick again.
            self._align_next()
            return Pacing(None, None)
        return Pacing(None, self._until_deadline())

    def timer_fired(self, t: float) -> Pacing:
        """The timer a Pacing asked for fired at monotonic time t."""
        clock = self.clock
        if clock.mode == VSYNC:
            # No swap for the watchdog's periods: vsync stopped pacing us.
            clock.fall_back_to_deadline(t)
            self._align_next()
            return Pacing(None, self._until_deadline())
        clock.on_tick(t)
        return Pacing(self.present(t), self._until_deadline())

    def _until_deadline(self) -> float:
        # Read the clock again: presenting took time, and the grid point does not move.
        return self.clock.next_deadline() - self.now()

    def _align_next(self) -> None:
        """Line frame spans up with the next tick now, a period before it needs its frame,
        so a re-phase never makes that tick late."""
        if self._media_time_at is not None:
            self.slots.align(self._media_time_at(self.clock.next_presentation()))

    # -- what it did ----------------------------------------------------------------

    def stats(self) -> dict:
        """Counters and timing: what a settings panel or a test wants to know."""
        stats = {
            **self.slots.counters(),
            "tick_jitter_ms": self.clock.jitter(),
            "display_mode": "probing" if self.clock.probing else self.clock.mode,
            "fps": self.measured_fps(),
            "missed_ticks": self.clock.missed,
            "stalls": self.stalls,
            "busy_stalls": self.busy_stalls,
            "longest_tick_gap_ms": self.longest_gap * 1e3,
            "longest_tick_gap_last_minute_ms": self.longest_recent_gap() * 1e3,
            "swap_latency_ms": self.clock.latency_ms(),
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

    def measured_fps(self) -> float:
        """Counted ticks per second over the last (up to) 120 of them."""
        ring = len(self._tick_times)
        n = min(self._ticks, ring)
        if n < 2:
            return 0.0
        span = self._tick_times[(self._ticks - 1) % ring] - self._tick_times[(self._ticks - n) % ring]
        return float((n - 1) / span) if span > 0 else 0.0

    def shutdown(self) -> None:
        """Stop producing; what was counted and logged stays readable."""
        self._stop_producer()

    def _stop_producer(self) -> None:
        if self.producer is not None:
            self.producer.stop()
            self.producer = None
