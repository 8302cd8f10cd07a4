"""Viseme tracks placed on the media clock, read by the frame producer without locks.

The speech worker writes (schedule, cut, clear); the frame producer reads (frame_pose).
Every write builds a new immutable tuple of entries and swaps it in with one attribute
assignment, which CPython performs atomically: a reader sees the old state or the new
one, never half of each, and never waits.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_right
from dataclasses import dataclass, replace

import numpy as np

from pipeline.core.easing import smoothstep
from pipeline.core.frames import MouthPose, VisemeCue
from pipeline.core.visemes import VISEME_INDEX
from pipeline.voice.viseme_track import SIL_POSE, VisemeTrack

# After Stop the mouth closes over this long: quick enough to match the silenced
# audio, slow enough not to snap shut.
CUT_BLEND = 0.040

# Entries that ended this long before newly scheduled speech are dropped: nothing will
# ask for frames that old, and the tuple copied on each write stays short.
PRUNE_AGE = 10.0

_SIL = VISEME_INDEX["sil"]


@dataclass(frozen=True, slots=True)
class _Entry:
    start: float
    track: VisemeTrack
    cut_at: float = math.inf

    @property
    def end(self) -> float:
        """When this entry's mouth is back at rest on the media clock."""
        return min(self.start + self.track.duration, self.cut_at + CUT_BLEND)


class SpeechTimeline:
    """VisemeTracks scheduled at absolute media times; sil wherever nothing is scheduled."""

    def __init__(self) -> None:
        self._state: tuple[tuple[_Entry, ...], tuple[float, ...]] = ((), ())
        self._version = 0
        # Serialises writers only; readers never take it.
        self._write_lock = threading.Lock()

    def _publish(self, entries: tuple[_Entry, ...]) -> None:
        # One tuple holding both, so a reader never pairs old starts with new entries.
        self._state = (entries, tuple(e.start for e in entries))
        self._version += 1

    def version(self) -> int:
        """Changes on every schedule, cut or clear: poses made before may be stale."""
        return self._version

    @property
    def end_time(self) -> float:
        """Media time after which the mouth rests (0.0 when nothing is scheduled)."""
        entries, _ = self._state
        return max((e.end for e in entries), default=0.0)

    def schedule(self, track: VisemeTrack, media_start: float) -> None:
        """Play `track` from `media_start` (media seconds); a later start takes over
        from an earlier entry where they overlap."""
        with self._write_lock:
            entries, _ = self._state
            kept = [e for e in entries if e.end >= media_start - PRUNE_AGE]
            kept.append(_Entry(media_start, track))
            kept.sort(key=lambda e: e.start)
            self._publish(tuple(kept))

    def cut(self, media_time: float) -> None:
        """Stop: speech already scheduled falls silent from `media_time` on."""
        with self._write_lock:
            entries, _ = self._state
            self._publish(tuple(
                replace(e, cut_at=min(e.cut_at, media_time)) if e.end > media_time else e
                for e in entries
            ))

    def clear(self) -> None:
        with self._write_lock:
            self._publish(())

    def cues(self) -> list[VisemeCue]:
        """Everything scheduled as cues on one timeline starting at the first entry (what
        a played utterance looked like; cut entries end at their cut)."""
        entries, _ = self._state
        if not entries:
            return []
        origin = entries[0].start
        out: list[VisemeCue] = []
        for entry in entries:
            for cue in entry.track.cues():
                start = entry.start + cue.start
                end = min(entry.start + cue.end, entry.cut_at)
                if end > start:
                    out.append(VisemeCue(start - origin, end - origin, cue.value))
        return out

    def onsets(self) -> tuple[np.ndarray, np.ndarray]:
        """(media times, viseme indices) at which each scheduled viseme starts, before
        any cut: what the mouth on screen is measured against."""
        entries, _ = self._state
        times: list[float] = []
        visemes: list[int] = []
        for entry in entries:
            for cue in entry.track.cues():
                if entry.start + cue.start < entry.cut_at:
                    times.append(entry.start + cue.start)
                    visemes.append(VISEME_INDEX[cue.value])
        return np.asarray(times, dtype=np.float64), np.asarray(visemes, dtype=np.int16)

    def frame_pose(self, t_start: float, period: float) -> MouthPose:
        """The pose for the display frame visible over [t_start, t_start + period)."""
        entries, starts = self._state
        centre = t_start + period / 2
        index = bisect_right(starts, centre) - 1
        if index < 0:
            return SIL_POSE
        entry = entries[index]
        local = t_start - entry.start
        if centre < entry.cut_at:
            return entry.track.frame_pose(local, period, until=entry.cut_at - entry.start)
        # Freeze the mouth where Stop caught it and close it from there.
        caught = entry.track.pose_at(entry.cut_at - entry.start)
        mix = smoothstep((centre - entry.cut_at) / CUT_BLEND)
        if mix >= 1.0:
            return SIL_POSE
        return MouthPose(caught.dominant, _SIL, mix, (1.0 - mix) * caught.openness)
