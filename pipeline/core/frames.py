"""Small typed records that flow between stages. Stages know these, not each other."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, slots=True)
class PhonemeTiming:
    """One folded phoneme on its utterance's own timeline (seconds from the first sample)."""

    phoneme: str
    viseme: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class WordTiming:
    """One spoken word on its utterance's own timeline: the voice's symbols for it (as
    piper reads it) over [start, end) seconds from the first sample."""

    phonemes: str
    start: float
    end: float


@dataclass(slots=True)
class SpeechSegment:
    """One synthesized piece of speech (a sentence or part of one) with exact timing."""

    text: str
    audio: np.ndarray  # float32 mono in [-1, 1]
    sample_rate: int
    phonemes: list[PhonemeTiming]
    notices: list[str] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return len(self.audio) / self.sample_rate


@dataclass(frozen=True, slots=True)
class VisemeCue:
    """A span of time during which one viseme is the mouth's target (Rhubarb cue shape)."""

    start: float
    end: float
    value: str


@dataclass(frozen=True, slots=True)
class MouthPose:
    """What the mouth shows at one instant: a blend of two visemes plus jaw openness.

    `mix` is the weight of `viseme_b`; the displayed (dominant) viseme is `viseme_b`
    when mix >= 0.5. Indices are into `pipeline.core.visemes.OVR_VISEMES`.
    """

    viseme_a: int
    viseme_b: int
    mix: float
    openness: float

    @property
    def dominant(self) -> int:
        return self.viseme_b if self.mix >= 0.5 else self.viseme_a


def frame_count(duration: float, fps: float) -> int:
    """Frames of a `duration`-second video at `fps`: every instant of the sound is in one,
    and at least one (the 1e-9 keeps a duration that is a whole number of frames, as
    float arithmetic gives it, from getting one more)."""
    return max(1, math.ceil(duration * fps - 1e-9))
