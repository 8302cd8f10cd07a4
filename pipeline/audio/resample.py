"""Sample-rate conversion from the voice's rate to the output device's rate, in one go or
chunk by chunk as a stream arrives.

One windowed-sinc polyphase filter serves both, so audio resampled in chunks is the very
same audio as resampled whole: no seams at chunk boundaries, and tests can compute what
the device must play.
"""

from __future__ import annotations

from functools import lru_cache
from math import gcd

import numpy as np

# Filter half-width in zero crossings of the sinc, and the Kaiser window's shape: ~90 dB
# stop band, pass band flat to 0.9 of the lower Nyquist frequency.
ZERO_CROSSINGS = 24
KAISER_BETA = 9.0
CUTOFF = 0.92
# Output samples computed per numpy call (see StreamResampler.process).
_SLICE = 1024


class StreamResampler:
    """Resamples a mono stream chunk by chunk; `process(..., last=True)` flushes it.

    Output n sits at input position n·src/dst. It is emitted once the input reaches past
    the filter's right half, so a chunk's output lags its input by ZERO_CROSSINGS input
    samples at most (1 ms at 22,050 Hz) until the flush.
    """

    def __init__(self, src_rate: int, dst_rate: int) -> None:
        if src_rate <= 0 or dst_rate <= 0:
            raise ValueError(f"sample rates must be positive, got {src_rate} and {dst_rate}")
        g = gcd(int(src_rate), int(dst_rate))
        self.up, self.down = dst_rate // g, src_rate // g
        self.half, self._weights = _filter(self.up, self.down)
        self._taps = np.arange(2 * self.half)
        self._buffer = np.zeros(self.half, np.float32)  # zeros before the stream starts
        self._base = -self.half  # input index of _buffer[0]
        self._received = 0
        self._emitted = 0

    def process(self, chunk: np.ndarray, last: bool = False) -> np.ndarray:
        chunk = np.asarray(chunk, dtype=np.float32)
        if chunk.ndim != 1:
            raise ValueError("StreamResampler takes mono audio (a 1-D array)")
        self._buffer = np.concatenate((self._buffer, chunk))
        self._received += len(chunk)
        if last:
            end = -(-self._received * self.up // self.down)
            self._buffer = np.concatenate((self._buffer, np.zeros(self.half + 1, np.float32)))
        else:
            ready = self._received - self.half
            end = max(0, -(-ready * self.up // self.down)) if ready > 0 else 0
        if end <= self._emitted:
            return np.zeros(0, np.float32)
        out = np.empty(end - self._emitted, np.float32)
        # In slices: numpy's gathers hold the GIL, and one over a whole chunk (a million
        # taps) kept the audio callbacks waiting past a 5 ms JACK period (xruns).
        for lo in range(self._emitted, end, _SLICE):
            n = np.arange(lo, min(lo + _SLICE, end))
            position = n * self.down
            first_tap = position // self.up - self.half + 1 - self._base
            out[lo - self._emitted:lo - self._emitted + len(n)] = np.einsum(
                "ij,ij->i",
                self._buffer[first_tap[:, None] + self._taps[None, :]],
                self._weights[position % self.up],
            )
        self._emitted = end
        keep_from = (end * self.down) // self.up - self.half + 1 - self._base
        if keep_from > 0:
            self._buffer = self._buffer[keep_from:]
            self._base += keep_from
        return out


@lru_cache(maxsize=8)
def _filter(up: int, down: int) -> tuple[int, np.ndarray]:
    """(half-width in input samples, weights[p, j]) of the filter for a rate ratio up/down,
    made once per ratio and shared, read-only: a speaker makes a resampler for every
    sentence, and making the filter took 0.8 ms of each first chunk (22,050 to 48,000 Hz,
    2-vCPU VM)."""
    # Cut-off relative to the input's Nyquist frequency: below the output's when
    # downsampling, so nothing folds back.
    fc = CUTOFF * min(1.0, up / down)
    half = int(np.ceil(ZERO_CROSSINGS / fc))
    taps = np.arange(2 * half)
    # weights[p, j]: output phase p/up between inputs, tap j at input offset j - half + 1.
    x = (np.arange(up)[:, None] / up) + (half - 1 - taps)[None, :]
    window = np.kaiser(2 * half + 1, KAISER_BETA)
    w = np.interp(x, np.arange(-half, half + 1), window)
    weights = (fc * np.sinc(fc * x) * w).astype(np.float32)
    weights.flags.writeable = False
    return half, weights


def resample(audio: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    """Resample mono audio whole; the same samples StreamResampler gives chunk by chunk."""
    audio = np.asarray(audio, dtype=np.float32)
    if src_rate == dst_rate and src_rate > 0:
        return audio.copy()
    return StreamResampler(src_rate, dst_rate).process(audio, last=True)
