"""A fixed, time-indexed ring of mouth frames shared by one producer and one consumer.

Frame k covers media time [phase + k·period, phase + (k+1)·period) and lives in slot
k mod count. The renderer sets `phase` from the heard time of its ticks, so a frame's
span is exactly the span during which it is on screen. Nothing is allocated per frame
and nothing is locked: each slot carries a write sequence number that the producer
clears before writing and sets last, and a reader that sees it change discards what
it read (a seqlock), so a torn frame is never returned.

The counters of what the consumer showed live here too, beside the producer's `dropped`,
so one place says what went through the ring: `presented` (the frame for the tick's heard
time was ready), `late` (it was not: the tick showed a stand-in), split into `held` (the
last frame shown again) and `interpolated` (its two neighbours' midpoint), so
late == held + interpolated; and `degraded_shown`, frames shown that the producer made on
its degraded path.
"""

from __future__ import annotations

import math
import time

import numpy as np

from pipeline.core.avatar_state import SIZE, AvatarState

_WRITING = -1


_TORN = object()
_READ_TRIES = 3


class FrameSlots:
    """`count` preallocated frame slots of `period` seconds each, indexed by media time."""

    def __init__(self, count: int, period: float) -> None:
        if count < 3:
            raise ValueError("FrameSlots needs at least 3 slots (previous, current, next)")
        if period <= 0:
            raise ValueError("period must be positive")
        self.count = count
        self.period = float(period)
        self.frame = np.full(count, np.iinfo(np.int64).min, dtype=np.int64)
        self.epoch = np.zeros(count, dtype=np.int64)
        self.stamp = np.zeros(count, dtype=np.float64)
        # One AvatarState row per slot (pipeline.core.avatar_state): the whole avatar.
        self.states = np.zeros((count, SIZE), dtype=np.float64)
        self.made_degraded = np.zeros(count, dtype=np.bool_)
        self.seq = np.zeros(count, dtype=np.int64)
        self._writes = 0
        # (epoch, phase) is replaced as one tuple so the producer never pairs an epoch
        # with another's phase; a new epoch makes every frame written before it stale.
        self._timebase: tuple[int, float] = (0, 0.0)
        # Stamp and path of the last frame take_state() found, read inside its consistency check.
        self.taken_stamp = 0.0
        self.taken_degraded = False
        self.presented = 0
        self.late = 0
        self.held = 0
        self.interpolated = 0
        self.degraded_shown = 0
        self.dropped = 0

    @property
    def phase(self) -> float:
        return self._timebase[1]

    @property
    def timebase(self) -> tuple[int, float]:
        """(epoch, phase): frames written under another epoch are not returned by take_state()."""
        return self._timebase

    def align(self, heard: float) -> bool:
        """Keep frame boundaries on the renderer's ticks: re-phase to `heard` only when
        the boundary has drifted more than period/8 from it. The drift is measured
        across the wrap and applied as is (phase is not reduced modulo the period), so
        frame indices keep their meaning and frames made just before a small re-phase
        stay usable (see take). Returns True when it re-phased."""
        epoch, phase = self._timebase
        p = self.period
        drift = (heard - phase + 0.5 * p) % p - 0.5 * p
        if abs(drift) <= p / 8:
            return False
        self._timebase = (epoch, phase + drift)
        return True

    def invalidate(self) -> None:
        """Make every stored frame stale (new utterance, seek, new pose source)."""
        epoch, phase = self._timebase
        self._timebase = (epoch + 1, phase)

    def frame_index(self, t: float) -> int:
        """Index of the frame whose span contains media time t."""
        return math.floor((t - self._timebase[1]) / self.period)

    def frame_start(self, frame_index: int) -> float:
        return self._timebase[1] + frame_index * self.period

    def write(self, frame_index: int, frame: AvatarState,
              timebase: tuple[int, float] | None = None, degraded: bool = False) -> None:
        """Store `frame` as frame `frame_index`. `timebase` is the (epoch, phase) the
        producer computed the frame under; a frame of a superseded epoch is never taken.
        `degraded`: the frame was made on the producer's cheaper path. Copies a row:
        allocates nothing."""
        epoch, phase = self._timebase if timebase is None else timebase
        s = frame_index % self.count
        self.seq[s] = _WRITING
        self.frame[s] = frame_index
        self.epoch[s] = epoch
        self.stamp[s] = phase + (frame_index + 0.5) * self.period
        np.copyto(self.states[s], frame.values)
        self.made_degraded[s] = degraded
        self._writes += 1
        self.seq[s] = self._writes

    def take_state(self, frame_index: int, out: AvatarState) -> bool:
        """Copy the frame stored for `frame_index` into `out`; False (and `out` left
        undefined) when the slot does not hold that frame: not produced yet, overwritten,
        of an older epoch, or made for a phase more than period/4 away from the current
        one. A slot caught mid-write (the producer re-making it) is read again: the
        write takes microseconds. Allocates nothing."""
        for _ in range(_READ_TRIES):
            read = self._read(frame_index, out)
            if read is not _TORN:
                return read
            # The writer is another Python thread: yield the GIL so it can finish.
            time.sleep(0)
        return False

    def _read(self, frame_index: int, out: AvatarState):
        s = frame_index % self.count
        before = self.seq[s]
        if before == _WRITING:
            return _TORN
        epoch, phase = self._timebase
        if self.frame[s] != frame_index or self.epoch[s] != epoch:
            return False
        stamp = self.stamp[s]
        if abs(stamp - (phase + (frame_index + 0.5) * self.period)) > 0.25 * self.period:
            return False
        np.copyto(out.values, self.states[s])
        degraded = bool(self.made_degraded[s])
        if self.seq[s] != before:
            return _TORN
        self.taken_stamp = float(stamp)
        self.taken_degraded = degraded
        return True

    def counters(self) -> dict[str, int]:
        return {"presented": self.presented, "late": self.late, "held": self.held,
                "interpolated": self.interpolated, "degraded_shown": self.degraded_shown,
                "dropped": self.dropped}
