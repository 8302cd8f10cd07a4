"""The record every real-speech source yields."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import soundfile

from pipeline.audio.resample import resample

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
            raise ValueError(
                f"{self.name}: condition {self.condition!r} is not one of {CONDITIONS}")
        if self.sex not in SEXES:
            raise ValueError(f"{self.name}: sex {self.sex!r} is not one of {SEXES}")
        if self.audio.dtype != np.float32 or self.audio.ndim != 1:
            raise ValueError(f"{self.name}: audio must be mono float32")

    @property
    def seconds(self) -> float:
        return len(self.audio) / SAMPLE_RATE


def read_audio(source: Path | BinaryIO, start: float = 0.0, end: float | None = None
               ) -> np.ndarray:
    """Mono float32 at SAMPLE_RATE in [-1, 1] of an audio file (WAV, FLAC, Ogg, MP3), or of
    its bytes, between `start` and `end` seconds.

    libsndfile decodes, not the app's PyAV reader (pipeline.audio.audio_file): the dev set's
    alignments are cached by the decoded samples, and another MP3 decoder would change
    them. Stereo is refused rather than mixed: no source here has two channels of one
    talker."""
    data, rate = soundfile.read(source, dtype="float32", always_2d=True)
    if data.shape[1] != 1:
        raise ValueError(f"{source}: {data.shape[1]} channels, expected one")
    data = data[int(start * rate): None if end is None else int(end * rate), 0]
    if rate != SAMPLE_RATE:
        data = resample(data, rate, SAMPLE_RATE)
    return np.clip(data, -1.0, 1.0).astype(np.float32)
