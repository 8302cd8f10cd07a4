"""The record every real-speech source yields."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SAMPLE_RATE = 16000

CONDITIONS = ("clean", "noisy", "reverberant", "band-limited", "telephone")
SEXES = ("f", "m", "?")


@dataclass(frozen=True)
class Clip:
    """One utterance of real speech with its transcript.

    Invariants: `audio` is mono float32 at SAMPLE_RATE in [-1, 1]; `text` is the English
    words spoken, in order (punctuation allowed, no markup); `speaker` is stable across
    runs and unique across sources ("source/who"); `name` is unique across all clips.
    """

    name: str
    source: str
    speaker: str
    sex: str
    condition: str
    audio: np.ndarray
    text: str
    licence: str

    def __post_init__(self) -> None:
        if self.condition not in CONDITIONS:
            raise ValueError(f"{self.name}: condition {self.condition!r} is not one of {CONDITIONS}")
        if self.sex not in SEXES:
            raise ValueError(f"{self.name}: sex {self.sex!r} is not one of {SEXES}")
        if self.audio.dtype != np.float32 or self.audio.ndim != 1:
            raise ValueError(f"{self.name}: audio must be mono float32")

    @property
    def seconds(self) -> float:
        return len(self.audio) / SAMPLE_RATE
