"""Keeps the frame slots filled ahead of the display, on a thread of its own.

Each frame is a whole AvatarState: the mouth from the pose source, and the rest (blinks,
breathing, the avatar's bounce, tilt, sway and expression; later a tracker's head and
brows) from the motion filled in at the frame's own media time after the mouth, from the
same state, so every part of the avatar is as frame-exact as the mouth.

The display never waits for this thread: it takes whatever its slot holds at its tick.
So the producer's job is to be ahead, and when it cannot be (a slow pose source) to
degrade rather than fall further behind: a frame that took longer than two display
ticks switches production to a cheaper path for a while (brief, mechanism 4).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Hashable

from pipeline.core.avatar_state import AvatarState
from pipeline.core.frames import MouthPose
from render.timing.frame_slots import FrameSlots

log = logging.getLogger(__name__)

PoseSource = Callable[[float, float], MouthPose]
MediaClock = Callable[[float], float]
# Fills in what is not the mouth, for the frame centred on a media time.
Motion = Callable[[AvatarState, float], None]


def unblended(source: PoseSource) -> PoseSource:
    """The default degraded path: the dominant viseme alone, no cross-fade."""

    def pose(t_start: float, period: float) -> MouthPose:
        full = source(t_start, period)
        return MouthPose(full.dominant, full.dominant, 0.0, full.openness)

    return pose


class FrameProducer:
    """Fills `slots` from `pose_source` for media times now … now + lookahead.

    `media_time_at(t_monotonic)` is the media clock; `clock` is the monotonic clock it
    is read with (injected in tests). In degraded mode every second frame reuses the
    pose of the one before it, and `degraded_source` (default: the full source without
    blending) computes the others, so production cost at least halves.
    """

    def __init__(
        self,
        slots: FrameSlots,
        pose_source: PoseSource,
        media_time_at: MediaClock,
        *,
        lookahead: float = 0.2,
        poll_interval: float = 0.004,
        degraded_source: PoseSource | None = None,
        degraded_hold: float = 1.0,
        source_version: Callable[[], Hashable] | None = None,
        motion: Motion | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.slots = slots
        self.pose_source = pose_source
        self.motion = motion
        self._state = AvatarState()  # the frame being made, copied into its slot
        # When what the source says changes (speech scheduled or stopped), frames already
        # made for the coming lookahead are stale and are made again from now on.
        self.source_version = source_version or (lambda: 0)
        self._seen_version = self.source_version()
        self.degraded_source = degraded_source or unblended(pose_source)
        self.media_time_at = media_time_at
        # Writing further ahead than the ring holds would overwrite frames not yet shown.
        self.lookahead = min(lookahead, (slots.count - 2) * slots.period)
        self.poll_interval = poll_interval
        self.degraded_hold = degraded_hold
        self.overrun_limit = 2 * slots.period
        self.clock = clock
        self.produced = 0
        self.degraded_frames = 0
        self.overruns = 0
        self.degraded_until = -math.inf
        self.max_frame_seconds = 0.0
        self._next: int | None = None
        self._timebase: tuple[int, float] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def degraded(self) -> bool:
        return self.clock() < self.degraded_until

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("FrameProducer already started")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="frame-producer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self.fill()
            self._stop.wait(self.poll_interval)

    def fill(self) -> int:
        """One pass: produce every missing frame from now to now + lookahead.
        Returns how many frames it wrote. Called by the thread; tests call it directly."""
        slots = self.slots
        period = slots.period
        timebase = slots.timebase
        phase = timebase[1]
        now = self.media_time_at(self.clock())
        # A frame is past once its span has ended; until then a late tick may still want it.
        first = math.floor((now - phase) / period)
        last = math.floor((now + self.lookahead - phase) / period)
        version = self.source_version()
        if (timebase != self._timebase or self._next is None or self._next > last + 1
                or version != self._seen_version):
            # New epoch or phase, first pass, the media clock went back, or the source
            # changed: (re)make everything from now on.
            self._timebase = timebase
            self._seen_version = version
            self._next = first
        elif self._next < first:
            slots.dropped += first - self._next
            self._next = first
        written = 0
        held: MouthPose | None = None
        while self._next <= last and not self._stop.is_set():
            k = self._next
            started = self.clock()
            degraded = started < self.degraded_until
            if not degraded:
                pose = self.pose_source(phase + k * period, period)
                held = None
            elif held is not None and k % 2 == 1:
                pose = held
                held = None
            else:
                pose = self.degraded_source(phase + k * period, period)
                held = pose
            state = self._state
            state.clear()
            state.set_mouth(pose)
            if self.motion is not None:
                self.motion(state, phase + (k + 0.5) * period)
            finished = self.clock()
            # Counted before the re-phase check: a source too slow for the tick must be
            # degraded even when the slots re-phased under it and its frame is thrown away
            # (on a busy machine a late swap re-phases them during just such a stall).
            self._note_cost(finished - started, finished, degraded)
            if slots.timebase != timebase:
                return written
            slots.write(k, state, timebase, degraded)
            written += 1
            self.produced += 1
            self._next = k + 1
            if phase + (self._next + 1) * period <= self.media_time_at(finished):
                # Too slow to stay ahead: skip to the present instead of filling the past.
                return written
        return written

    def _note_cost(self, seconds: float, now: float, was_degraded: bool) -> None:
        if was_degraded:
            self.degraded_frames += 1
        if seconds > self.max_frame_seconds:
            self.max_frame_seconds = seconds
        if seconds > self.overrun_limit:
            self.overruns += 1
            if not was_degraded:
                log.warning("frame took %.1f ms (> 2 ticks): degraded mode for %.1f s",
                            seconds * 1e3, self.degraded_hold)
            self.degraded_until = now + self.degraded_hold

    def stats(self) -> dict[str, float | int | bool]:
        return {"produced": self.produced, "dropped": self.slots.dropped,
                "overruns": self.overruns, "degraded_frames": self.degraded_frames,
                "degraded": self.degraded, "max_frame_ms": self.max_frame_seconds * 1e3}
