"""Phoneme timings → a viseme track, and the mouth pose it shows at any instant.

Piper's alignment gives durations per phoneme *symbol*; several symbols carry no
articulation of their own (stress and length marks, diacritics) or are halves of one
sound (diphthongs, affricates). Folding turns them into articulations first.
"""

from __future__ import annotations

import functools
import logging
import math
import unicodedata
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.core.easing import smoothstep
from pipeline.core.frames import MouthPose, PhonemeTiming, VisemeCue, WordTiming
from pipeline.core.visemes import (
    CLUSTERS,
    IPA_TO_VISEME,
    LENGTH_MARKS,
    MUST_SHOW_INDICES,
    OPENNESS,
    OVR_VISEMES,
    PAUSES,
    STRESS_MARKS,
    VISEME_INDEX,
    viseme_for_phoneme,
)

log = logging.getLogger(__name__)

# Coarticulation reaches at most this far either side of a boundary: long enough that
# the mouth visibly anticipates the next sound, short enough not to smear syllables.
MAX_BLEND_HALF_WIDTH = 0.025

_SIL = VISEME_INDEX["sil"]
_OPENNESS_BY_INDEX = tuple(OPENNESS[v] for v in OVR_VISEMES)
_CLUSTER_LENGTHS = sorted({len(c) for c in CLUSTERS}, reverse=True)
_CLUSTER_SET = frozenset(CLUSTERS)
# The characters a cluster can begin with: a symbol that begins with none of them starts
# no cluster, which spares most symbols the cluster joins. With this and the per-symbol
# checks cached, fold_phonemes took 134 us for a later window's 98 symbols against 227
# (18 against 20 for a first window's 8; 2-vCPU AMD VM): each stream folds every window.
_CLUSTER_STARTS = frozenset(c[0] for c in CLUSTERS)
# Symbols that modify the sound before them (ʲ ʰ ˞ and combining diacritics).
_MODIFIERS = frozenset("ʰʲ˞ˤʷ")
SIL_POSE = MouthPose(_SIL, _SIL, 0.0, 0.0)
# Just before a boundary the outgoing viseme must still dominate, even where rounding
# would make the blend weight exactly one half.
_BELOW_HALF = math.nextafter(0.5, 0.0)
# Phonemes with no viseme of their own already logged: each is said once a process, not
# once a sentence.
_UNMAPPED_TOLD: set[str] = set()


@functools.cache
def _attaches_to_previous(symbol: str) -> bool:
    # espeak writes a tone language's tones as digits after the syllable (Mandarin
    # "ni2"): the pitch of the sound before, no articulation.
    return (symbol in LENGTH_MARKS or symbol in _MODIFIERS or symbol.isdigit()
            or bool(unicodedata.combining(symbol)))


@functools.cache
def _viseme(symbol: str) -> str:
    """The symbol's viseme; a sound the map does not list is logged (once) with the
    viseme it is shown as, so a language's gaps in the map can be found and filled."""
    viseme = viseme_for_phoneme(symbol)
    if symbol not in IPA_TO_VISEME and symbol not in PAUSES and symbol not in _UNMAPPED_TOLD:
        _UNMAPPED_TOLD.add(symbol)
        log.info("phoneme %r has no viseme of its own in pipeline.core.visemes: shown as %r "
                 "(by its base sound, else the default)", symbol, viseme)
    return viseme


def fold_phonemes(alignments: Sequence[tuple[str, int]], sample_rate: int) -> list[PhonemeTiming]:
    """Fold piper's per-symbol sample counts into contiguous per-articulation timings.

    Stress marks give their duration to the following sound, length marks and
    diacritics to the preceding one; split clusters are merged (longest match);
    BOS/EOS/pads/punctuation become "sil". The last end is total samples / sample_rate.
    """
    if sample_rate <= 0:
        raise ValueError("sample_rate must be positive")
    folded: list[list] = []  # [symbol, samples] pairs, mutable while folding
    pending_stress = 0
    symbols = [s for s, _ in alignments]
    i = 0
    while i < len(alignments):
        symbol, samples = alignments[i]
        if samples < 0:
            raise ValueError(f"negative sample count for {symbol!r}")
        if symbol in STRESS_MARKS:
            pending_stress += samples
            i += 1
            continue
        if folded and _attaches_to_previous(symbol) and folded[-1][0] not in PAUSES:
            folded[-1][0] += symbol
            folded[-1][1] += samples + pending_stress
            pending_stress = 0
            i += 1
            continue
        width = 1
        if symbol[:1] in _CLUSTER_STARTS:
            width = next((n for n in _CLUSTER_LENGTHS
                          if "".join(symbols[i:i + n]) in _CLUSTER_SET), 1)
        if width == 1:
            folded.append([symbol, samples + pending_stress])
        else:
            folded.append(["".join(symbols[i:i + width]),
                           sum(s for _, s in alignments[i:i + width]) + pending_stress])
        pending_stress = 0
        i += width
    if pending_stress:
        # A trailing stress mark has no sound to give its time to: keep it on the last.
        if folded:
            folded[-1][1] += pending_stress
        else:
            folded.append(["_", pending_stress])

    timings: list[PhonemeTiming] = []
    position = 0
    for symbol, samples in _close_word_gaps(folded):
        viseme = _viseme(symbol)
        end = position + samples
        timings.append(PhonemeTiming(symbol, viseme, position / sample_rate, end / sample_rate))
        position = end
    return timings


def word_timings(alignments: Sequence[tuple[str, int]], sample_rate: int) -> list[WordTiming]:
    """The words of piper's per-symbol sample counts: each run of symbols between pauses
    (word gaps, punctuation, BOS/EOS: PAUSES), timed on the same sample grid as
    fold_phonemes (seconds from the first sample)."""
    words: list[WordTiming] = []
    word: list[str] = []
    position = start = 0
    for symbol, samples in alignments:
        if symbol in PAUSES:
            if word:
                words.append(WordTiming("".join(word), start / sample_rate, position / sample_rate))
                word = []
        else:
            if not word:
                start = position
            word.append(symbol)
        position += samples
    if word:
        words.append(WordTiming("".join(word), start / sample_rate, position / sample_rate))
    return words


def _close_word_gaps(folded: list[list]) -> list[list]:
    """Inside a phrase the voice runs on across word gaps, and so do the lips: closing
    the mouth for every space makes it chatter while sound is still playing. A gap
    between two sounds gives half its time to each; gaps next to pauses stay rest."""
    out: list[list] = []
    for i, (symbol, samples) in enumerate(folded):
        before = out[-1] if out else None
        after = folded[i + 1] if i + 1 < len(folded) else None
        if (symbol == " " and before is not None and after is not None
                and before[0] not in PAUSES and after[0] not in PAUSES):
            before[1] += samples // 2
            after[1] += samples - samples // 2
            continue
        out.append([symbol, samples])
    return out


@dataclass(frozen=True, slots=True)
class _Segment:
    start: float
    end: float
    viseme: int

    @property
    def duration(self) -> float:
        return self.end - self.start


class VisemeTrack:
    """Visemes of one utterance on its own timeline [0, duration], immutable."""

    def __init__(self, phonemes: Sequence[PhonemeTiming]):
        if not phonemes:
            raise ValueError("a viseme track needs at least one phoneme timing")
        segments: list[_Segment] = []
        position = 0.0
        for p in phonemes:
            if p.viseme not in VISEME_INDEX:
                raise ValueError(f"unknown viseme {p.viseme!r} for phoneme {p.phoneme!r}")
            if p.end < p.start or p.start < position - 1e-9:
                raise ValueError("phoneme timings must be in order and not overlap")
            if p.start > position:
                # A gap in the timings is silence, not a held mouth shape.
                segments.append(_Segment(position, p.start, _SIL))
            if p.end > p.start:
                segments.append(_Segment(max(p.start, position), p.end, VISEME_INDEX[p.viseme]))
            position = max(position, p.end)
        if not segments:
            segments.append(_Segment(0.0, position, _SIL))
        merged: list[_Segment] = [segments[0]]
        for seg in segments[1:]:
            if seg.viseme == merged[-1].viseme:
                merged[-1] = _Segment(merged[-1].start, seg.end, seg.viseme)
            else:
                merged.append(seg)
        self._segments: tuple[_Segment, ...] = tuple(merged)
        self._starts: tuple[float, ...] = tuple(s.start for s in merged)
        self.duration: float = position

    def cues(self) -> list[VisemeCue]:
        return [VisemeCue(s.start, s.end, OVR_VISEMES[s.viseme]) for s in self._segments]

    def _index_at(self, t: float) -> int:
        return max(0, bisect_right(self._starts, t) - 1)

    def _half_width(self, boundary_index: int) -> float:
        """Blend half-width around the start of segment `boundary_index` (> 0)."""
        prev, cur = self._segments[boundary_index - 1], self._segments[boundary_index]
        return min(MAX_BLEND_HALF_WIDTH, prev.duration / 2, cur.duration / 2)

    def _blend(self, boundary_index: int, t: float) -> MouthPose:
        prev, cur = self._segments[boundary_index - 1], self._segments[boundary_index]
        h = self._half_width(boundary_index)
        mix = smoothstep((t - cur.start + h) / (2 * h))
        if t < cur.start:
            mix = min(mix, _BELOW_HALF)
        openness = (1 - mix) * _OPENNESS_BY_INDEX[prev.viseme] + mix * _OPENNESS_BY_INDEX[cur.viseme]
        return MouthPose(prev.viseme, cur.viseme, mix, openness)

    def pose_at(self, t: float) -> MouthPose:
        """The mouth at `t`: the dominant viseme changes exactly at segment boundaries,
        while the shapes blend over a window centred on each boundary."""
        if not 0.0 <= t <= self.duration:
            return SIL_POSE
        i = self._index_at(t)
        seg = self._segments[i]
        if i > 0 and t < seg.start + self._half_width(i):
            return self._blend(i, t)
        if i + 1 < len(self._segments) and t > seg.end - self._half_width(i + 1):
            return self._blend(i + 1, t)
        return MouthPose(seg.viseme, seg.viseme, 1.0, _OPENNESS_BY_INDEX[seg.viseme])

    def frame_pose(self, t_start: float, period: float, until: float | None = None) -> MouthPose:
        """The pose for a display frame visible over [t_start, t_start + period).

        Evaluated at the interval's centre. A lip closure or lip-teeth contact
        (MUST_SHOW) so short that it lies wholly between the previous frame's centre and
        this one's would be shown by no frame: this frame shows it, being the frame whose
        start is nearest to the sound's (within half a period). Sounds from `until` on are
        ignored (speech cut off there).
        """
        if period <= 0:
            raise ValueError("period must be positive")
        centre = t_start + period / 2
        pose = self.pose_at(centre)
        limit = self.duration if until is None else min(until, self.duration)
        best: _Segment | None = None
        for i in range(self._index_at(centre - period), len(self._segments)):
            seg = self._segments[i]
            if seg.start >= centre or seg.start >= limit:
                break
            if (seg.viseme in MUST_SHOW_INDICES and seg.start > centre - period
                    and seg.end <= centre):
                if best is None or seg.end - seg.start > best.end - best.start:
                    best = seg
        if best is None or pose.dominant == best.viseme:
            return pose
        return MouthPose(best.viseme, best.viseme, 1.0, _OPENNESS_BY_INDEX[best.viseme])
