"""Speech encoded as it is made, in the response formats of OpenAI's speech endpoint:
wav, pcm, mp3, opus, flac (POST /v1/audio/speech, openai_speech.py).

An encoder takes 16-bit PCM chunks at the voice's rate and returns the bytes to send now
(possibly none: a codec's frame or an Ogg page not full yet); `finish()` returns the rest.

- wav: a RIFF header whose sizes say "unknown" (0xFFFFFFFF, as streamed WAV does; readers
  take the data to the end of the stream), then the PCM itself, at the voice's rate;
- pcm: raw 16-bit little-endian mono at 24 kHz, which is what OpenAI's pcm is and what
  tools that ask for it expect (resampled from the voice's 22,050 Hz);
- mp3 (LAME, at the voice's rate), opus (in Ogg, at 24 kHz: opus takes 8/12/16/24/48 kHz),
  flac (at the voice's rate), through PyAV's FFmpeg, muxed into a stream that is never
  sought back on, so each page goes out as it is made.
"""

from __future__ import annotations

import io
import struct

import av
import numpy as np

from pipeline.audio.pcm import pcm16
from pipeline.audio.resample import StreamResampler

FORMATS = ("wav", "pcm", "mp3", "opus", "flac")
CONTENT_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm", "mp3": "audio/mpeg",
                 "opus": "audio/ogg; codecs=opus", "flac": "audio/flac"}
PCM_RATE = 24_000  # OpenAI's pcm, and our opus
_UNKNOWN = 0xFFFFFFFF
# (container, codec, rate: None for the voice's own)
_CODECS = {"mp3": ("mp3", "libmp3lame", None), "opus": ("ogg", "libopus", PCM_RATE),
           "flac": ("flac", "flac", None)}


def wav_header(sample_rate: int, data_bytes: int = _UNKNOWN) -> bytes:
    """A 44-byte RIFF/WAVE header for 16-bit mono PCM."""
    riff = _UNKNOWN if data_bytes == _UNKNOWN else 36 + data_bytes
    return struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", riff, b"WAVE", b"fmt ", 16, 1, 1,
                       sample_rate, sample_rate * 2, 2, 16, b"data", data_bytes)


class _Sink(io.RawIOBase):
    """What the muxer writes into: kept until taken."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


class Encoder:
    """One response's encoder for `fmt` (one of FORMATS) of audio at `sample_rate`."""

    def __init__(self, fmt: str, sample_rate: int) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"{fmt!r} is not one of {FORMATS}")
        self.format = fmt
        self.content_type = CONTENT_TYPES[fmt]
        self._rate = sample_rate
        self._started = False
        self._resampler = None
        self._container = self._stream = None
        if fmt == "pcm" and sample_rate != PCM_RATE:
            self._resampler = StreamResampler(sample_rate, PCM_RATE)
        if fmt in _CODECS:
            container, codec, rate = _CODECS[fmt]
            self._codec_rate = rate or sample_rate
            if self._codec_rate != sample_rate:
                self._resampler = StreamResampler(sample_rate, self._codec_rate)
            self._sink = _Sink()
            self._container = av.open(self._sink, mode="w", format=container)
            self._stream = self._container.add_stream(codec, rate=self._codec_rate)
            self._stream.layout = "mono"

    def encode(self, pcm: bytes) -> bytes:
        return self._encode(np.frombuffer(pcm, "<i2"), last=False)

    def finish(self) -> bytes:
        return self._encode(np.zeros(0, np.int16), last=True)

    def _encode(self, samples: np.ndarray, last: bool) -> bytes:
        head = b""
        if not self._started:
            self._started = True
            head = wav_header(self._rate) if self.format == "wav" else b""
        if self._resampler is not None:
            floats = self._resampler.process(samples.astype(np.float32) / 32767, last)
            samples = np.frombuffer(pcm16(floats), "<i2")
        if self._container is None:
            return head + samples.astype("<i2").tobytes()
        if len(samples):
            frame = av.AudioFrame.from_ndarray(samples.astype(np.int16)[None, :], format="s16",
                                               layout="mono")
            frame.sample_rate = self._codec_rate
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
        if last:
            for packet in self._stream.encode(None):
                self._container.mux(packet)
            self._container.close()
        return head + self._sink.take()
