"""Viseme cues as Rhubarb-shaped JSON, and whole renders stitched from sentence segments."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from pipeline.core.frames import SpeechSegment, VisemeCue
from pipeline.core.visemes import RHUBARB_SHAPE
from pipeline.voice.viseme_track import VisemeTrack

_VISEME_SETS = {"ovr": "ovr15", "rhubarb": "rhubarb"}


def cues_document(
    cues: Sequence[VisemeCue], sound_file: str, duration: float, fmt: str = "ovr"
) -> dict:
    """Rhubarb's JSON shape: times in whole milliseconds, cues contiguous from 0 to
    `duration` (gaps and the tail are "sil"), equal neighbours merged."""
    if fmt not in _VISEME_SETS:
        raise ValueError(f"unknown cue format {fmt!r}: use one of {', '.join(_VISEME_SETS)}")
    if duration < 0:
        raise ValueError("duration must not be negative")
    rename = RHUBARB_SHAPE if fmt == "rhubarb" else {}
    end_ms = round(duration * 1000)
    # Round each boundary once and reuse it as the next cue's start, so rounding can
    # neither open gaps nor overlap cues.
    spans: list[list] = []  # [start_ms, end_ms, value]
    position = 0
    for cue in sorted(cues, key=lambda c: c.start):
        start = min(max(round(cue.start * 1000), position), end_ms)
        stop = min(round(cue.end * 1000), end_ms)
        if start > position:
            spans.append([position, start, "sil"])
        if stop > start:
            spans.append([start, stop, cue.value])
            position = stop
    if position < end_ms:
        spans.append([position, end_ms, "sil"])

    mouth_cues: list[dict] = []
    for start, stop, value in spans:
        value = rename.get(value, value)
        if mouth_cues and mouth_cues[-1]["value"] == value:
            mouth_cues[-1]["end"] = stop / 1000
        else:
            mouth_cues.append({"start": start / 1000, "end": stop / 1000, "value": value})
    return {
        "metadata": {
            "soundFile": sound_file,
            "duration": end_ms / 1000,
            "visemeSet": _VISEME_SETS[fmt],
        },
        "mouthCues": mouth_cues,
    }


def concat_tracks(segments: Iterable[SpeechSegment]) -> tuple[np.ndarray, list[VisemeCue]]:
    """One audio buffer and one cue list for a multi-sentence render, sample-exact."""
    audio_parts: list[np.ndarray] = []
    cues: list[VisemeCue] = []
    sample_rate: int | None = None
    samples = 0
    for segment in segments:
        if sample_rate is None:
            sample_rate = segment.sample_rate
        elif segment.sample_rate != sample_rate:
            raise ValueError(
                f"segments differ in sample rate ({sample_rate} vs {segment.sample_rate} Hz)"
            )
        # Offsets from whole sample counts, so the cues stay on the audio's own clock
        # however many sentences are joined.
        offset = samples / sample_rate
        for cue in VisemeTrack(segment.phonemes).cues():
            start, end = offset + cue.start, offset + cue.end
            if cues and cues[-1].value == cue.value:
                cues[-1] = VisemeCue(cues[-1].start, end, cue.value)
            else:
                cues.append(VisemeCue(start, end, cue.value))
        audio_parts.append(segment.audio)
        samples += len(segment.audio)
    audio = np.concatenate(audio_parts).astype(np.float32) if audio_parts else np.zeros(0, np.float32)
    return audio, cues
