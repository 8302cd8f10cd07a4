"""Whole renders stitched from sentence segments: one audio buffer and one cue list
(the cue files themselves: pipeline.lipsync.cue_formats)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from pipeline.core.frames import SpeechSegment, VisemeCue
from pipeline.voice.viseme_track import VisemeTrack


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
