"""Recorded audio, read from whatever FFmpeg (through PyAV) decodes: WAV, MP3, OGG/Vorbis
and Opus, FLAC, M4A/AAC, and the audio of video files (MP4, MKV, WebM, MOV).

One reader for every offline use (`lipsync` cues, `render --audio`): the first audio
stream of the file, mixed to mono float32 at the file's own sample rate, streamed in
blocks so an hour-long file holds memory to one block. The duration is counted from the
decoded samples, not taken from the container's header (which MP3 and video files often
only estimate), so the cues end exactly where the sound does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np

# Blocks handed on: ~0.4-1 s at common rates, the size the lip-shape model was fed before.
BLOCK_FRAMES = 16_000


class AudioFileError(ValueError):
    """The file cannot be read as audio; the message is one line for the user."""


@dataclass(frozen=True, slots=True)
class AudioFileInfo:
    sample_rate: int
    samples: int
    channels: int
    codec: str

    @property
    def duration(self) -> float:
        return self.samples / self.sample_rate


def _open(path: Path):
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError, UnicodeDecodeError) as exc:
        raise AudioFileError(f"{path} is not an audio or video file this app can read "
                             f"({_reason(exc)})") from None
    if not container.streams.audio:
        container.close()
        raise AudioFileError(f"{path} has no sound in it (no audio track)")
    return container


def _reason(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc)
    return text.split(": '")[0].strip()


def _mono_blocks(path: Path, block_frames: int) -> Iterator[np.ndarray]:
    container = _open(path)
    with container:
        stream = container.streams.audio[0]
        # Any sample format and layout as float32, channels kept apart (planar).
        resampler = av.AudioResampler(format="fltp", layout=None, rate=None)
        pending: list[np.ndarray] = []
        held = 0
        try:
            for frame in container.decode(stream):
                for out in resampler.resample(frame):
                    mono = out.to_ndarray().astype(np.float32).mean(axis=0)
                    pending.append(mono)
                    held += len(mono)
                    if held >= block_frames:
                        yield np.concatenate(pending)
                        pending, held = [], 0
        except av.FFmpegError as exc:
            raise AudioFileError(f"{path} is damaged and cannot be read to its end "
                                 f"({_reason(exc)})") from None
        if pending:
            yield np.concatenate(pending)


def audio_info(path: Path | str) -> AudioFileInfo:
    """Rate, exact length, channels and codec of the file's first audio track (decoded
    once to count it); AudioFileError for a file that is not one, or holds no sound."""
    path = Path(path)
    container = _open(path)
    with container:
        stream = container.streams.audio[0]
        rate, channels, codec = stream.rate, stream.channels, stream.codec_context.name
    if not rate:
        raise AudioFileError(f"{path} has an audio track with no sample rate")
    samples = sum(len(block) for block in _mono_blocks(path, BLOCK_FRAMES))
    if samples == 0:
        raise AudioFileError(f"{path} holds no audio")
    return AudioFileInfo(rate, samples, channels, codec)


def read_blocks(path: Path | str, block_frames: int = BLOCK_FRAMES
                ) -> tuple[int, Iterator[np.ndarray]]:
    """(sample rate, float32 mono blocks of about `block_frames` samples) of the file's
    first audio track, decoded as they are taken."""
    path = Path(path)
    container = _open(path)
    with container:
        rate = container.streams.audio[0].rate
    return rate, _mono_blocks(path, block_frames)
