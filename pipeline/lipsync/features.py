"""Log-mel features for the lip-shape model, streamed block by block or for a whole file.

Audio of any rate is taken to 16 kHz; every 10 ms (160 samples) a frame of 40 log-mel
energies is made from the last 25 ms (400 samples). Frame k covers the 16 kHz samples
[(k + 1) * 160 - 400, (k + 1) * 160), so it exists as soon as its hop is complete:
`frame_end_s(k)` is the latest audio it depends on. The batch and streaming paths give
the same numbers (up to float rounding) for 16 kHz input; for other rates the streaming
resampler is a causal FIR whose small delay is reported in `delay_s`.

The streaming path allocates nothing per block once warm (float32 mono input): audio
arrives on a real-time thread, where the allocator's pauses would become jitter.
"""

from __future__ import annotations

from math import ceil, gcd

import numpy as np

from pipeline.audio.resample import resample

SAMPLE_RATE = 16_000
HOP = 160
WINDOW = 400
N_FFT = 512
N_MELS = 40
FMIN, FMAX = 50.0, 7_600.0
# Floor under the mel energies: below any microphone's noise, so silence maps to one
# steady value instead of -inf, and features stay finite for digital zeros.
POWER_FLOOR = 1e-10
# Anything beyond this is not audio scaled to [-1, 1] (16-bit integers passed unscaled,
# corrupted data): refusing it beats emitting features the model has never seen.
MAX_ABS_SAMPLE = 64.0


def frame_end_s(index: int) -> float:
    """Time (s) of the last 16 kHz sample frame `index` depends on, exclusive."""
    return (index + 1) * HOP / SAMPLE_RATE


def mel_filterbank() -> np.ndarray:
    """[N_MELS, N_FFT // 2 + 1] triangular filters on the HTK mel scale, area-normalised."""
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + np.asarray(f) / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10.0 ** (np.asarray(m) / 2595.0) - 1.0)

    edges = mel_to_hz(np.linspace(hz_to_mel(FMIN), hz_to_mel(FMAX), N_MELS + 2))
    bins = np.fft.rfftfreq(N_FFT, 1.0 / SAMPLE_RATE)
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bins[None, :] - lower) / (centre - lower)
    falling = (upper - bins[None, :]) / (upper - centre)
    weights = np.maximum(0.0, np.minimum(rising, falling))
    weights *= (2.0 / (upper - lower))
    return weights.astype(np.float32)


_WINDOW_FN = np.hanning(WINDOW + 2)[1:-1].astype(np.float32)
_MEL = mel_filterbank()
# The spectrum bins some mel filter weighs (50 Hz - 7.6 kHz): the others are never used.
_BINS = np.flatnonzero(_MEL.any(axis=0))


def _windowed_dft() -> np.ndarray:
    # The real DFT of the used bins as one matrix product, window folded in: cosine rows
    # then sine rows. numpy's FFT keeps a scratch copy per call (an allocation on the
    # audio thread), and at 400 points a product costs about the same.
    angle = 2 * np.pi * _BINS[:, None] * np.arange(WINDOW)[None, :] / N_FFT
    return (np.concatenate([np.cos(angle), -np.sin(angle)]) * _WINDOW_FN).astype(np.float32)


_DFT = _windowed_dft()
# Mel weights over the squared [cosine; sine] products: re^2 + im^2 folds into the product.
_MEL_STACKED = np.concatenate([_MEL[:, _BINS], _MEL[:, _BINS]], axis=1)


def as_mono_float(audio: np.ndarray) -> np.ndarray:
    """float32 mono in [-1, 1] from float or integer PCM, mono [n] or [n, channels].

    Integer PCM is scaled by its type's range (24-bit WAV arrives as left-aligned
    int32); channels are averaged. Raises ValueError for NaN/inf, other shapes,
    non-numeric data, or float data far outside [-1, 1]."""
    audio = np.asarray(audio)
    if audio.ndim not in (1, 2):
        raise ValueError(f"audio must be mono [n] or [n, channels], got shape {audio.shape}")
    if audio.dtype.kind == "i":
        audio = audio.astype(np.float32) / np.float32(-float(np.iinfo(audio.dtype).min))
    elif audio.dtype.kind == "u":
        middle = np.float32((int(np.iinfo(audio.dtype).max) + 1) / 2.0)
        audio = (audio.astype(np.float32) - middle) / middle
    elif audio.dtype.kind == "f":
        audio = audio.astype(np.float32, copy=False)
    else:
        raise ValueError(f"audio must be numeric PCM, got dtype {audio.dtype}")
    if audio.ndim == 2:
        audio = audio.mean(axis=1, dtype=np.float32)
    check_finite(audio)
    return np.ascontiguousarray(audio)


def check_finite(audio: np.ndarray) -> None:
    """Raise ValueError for NaN/inf or float audio not scaled to [-1, 1]."""
    if audio.size == 0:
        return
    # max/min propagate NaN and make no temporary array (the real-time path calls this).
    peak = max(float(np.max(audio)), -float(np.min(audio)))
    if not np.isfinite(peak):
        raise ValueError("audio contains NaN or infinite samples")
    if peak > MAX_ABS_SAMPLE:
        raise ValueError(
            f"audio peaks at {peak:.3g}: float audio must be scaled to [-1, 1] "
            "(integer PCM is scaled automatically)"
        )


def log_mel(audio_16k: np.ndarray) -> np.ndarray:
    """[frames, N_MELS] float32 for 16 kHz mono audio; frame k as in the module doc."""
    audio_16k = np.asarray(audio_16k, dtype=np.float32)
    n_frames = len(audio_16k) // HOP
    if n_frames == 0:
        return np.zeros((0, N_MELS), np.float32)
    padded = np.concatenate([np.zeros(WINDOW - HOP, np.float32), audio_16k[: n_frames * HOP]])
    frames = np.lib.stride_tricks.sliding_window_view(padded, WINDOW)[::HOP]
    return np.log((frames @ _DFT.T) ** 2 @ _MEL_STACKED.T + POWER_FLOOR).astype(np.float32)


def file_features(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """Log-mel frames for a whole recording at any rate (zero-phase resampling)."""
    mono = as_mono_float(audio)
    return log_mel(resample(mono, sample_rate, SAMPLE_RATE) if sample_rate != SAMPLE_RATE else mono)


class StreamingResampler:
    """Causal polyphase FIR resampler to 16 kHz, stateful across blocks, allocation-free.

    Works in whole periods of the reduced ratio (L outputs per M inputs); for the usual
    device rates (8/16/32/44.1/48/96 kHz) a period is at most 10 ms of output.
    """

    def __init__(self, src_rate: int, dst_rate: int = SAMPLE_RATE, max_block: int = 8192):
        if src_rate <= 0:
            raise ValueError(f"sample rate must be positive, got {src_rate}")
        g = gcd(int(src_rate), int(dst_rate))
        self.up, self.down = dst_rate // g, src_rate // g
        taps = 16 * max(1, ceil(self.down / self.up))
        n = self.up * taps
        cutoff = 0.5 * min(src_rate, dst_rate) * 0.9 / (self.up * src_rate)
        k = np.arange(n) - (n - 1) / 2.0
        h = 2 * cutoff * np.sinc(2 * cutoff * k) * np.kaiser(n, 8.0) * self.up
        # Row p holds phase p's taps, newest input first, so a row dots a forward slice.
        self._bank = h.reshape(taps, self.up).T[:, ::-1].astype(np.float32).copy()
        self.taps = taps
        self.delay_s = (n - 1) / 2.0 / (self.up * src_rate)
        self._periods_max = max(1, max_block // self.down + 1)
        out_max = self._periods_max * self.up
        self._history = np.zeros(taps - 1 + self._periods_max * self.down, np.float32)
        self._filled = taps - 1  # zeros stand in for the audio before the stream began
        self._scratch = np.empty_like(self._history)
        self._out = np.empty(out_max, np.float32)
        if self.up == 1:
            # Whole-number ratios (48, 32, 96 kHz) have one phase, so output j's inputs
            # are a fixed-stride view of the history: one product per push, no gather
            # (3x cheaper).
            step = self._history.itemsize
            self._windows = np.lib.stride_tricks.as_strided(
                self._history, (out_max, taps), (self.down * step, step), writeable=False)
        else:
            self._windows = None
            outputs = np.arange(out_max)
            base = (outputs * self.down) // self.up
            phase = (outputs * self.down) % self.up
            self._index = (base[:, None] + np.arange(taps)[None, :]).astype(np.intp)
            self._coeffs = self._bank[phase]
            self._gathered = np.empty((out_max, taps), np.float32)

    def push(self, block: np.ndarray) -> np.ndarray:
        """Resampled audio available after `block` (a view, valid until the next push)."""
        produced = 0
        start = 0
        while start < len(block):
            room = len(self._history) - self._filled
            take = min(room, len(block) - start)
            self._history[self._filled:self._filled + take] = block[start:start + take]
            self._filled += take
            start += take
            periods = (self._filled - (self.taps - 1)) // self.down
            if periods == 0:
                continue
            count = periods * self.up
            if produced + count > len(self._out):
                raise ValueError("block larger than the resampler was sized for")
            out = self._out[produced:produced + count]
            if self._windows is not None:
                np.matmul(self._windows[:count], self._bank[0], out=out)
            else:
                gathered = self._gathered[:count]
                # mode='clip' lets numpy write straight into `out` ('raise' buffers a copy).
                np.take(self._history, self._index[:count], out=gathered, mode="clip")
                np.multiply(gathered, self._coeffs[:count], out=gathered)
                np.sum(gathered, axis=1, out=out)
            produced += count
            used = periods * self.down
            keep = self._filled - used
            self._scratch[:keep] = self._history[used:self._filled]
            self._history[:keep] = self._scratch[:keep]
            self._filled = keep
        return self._out[:produced]


class StreamingLogMel:
    """Blocks of audio at `sample_rate` in, log-mel frames out as soon as each hop completes.

    `push` returns a view [n, N_MELS] of an internal buffer, valid until the next push;
    `frames_emitted` counts frames since the start, so frame i's end time is
    `frame_end_s(i) + delay_s` on the input's clock.
    """

    def __init__(self, sample_rate: int, max_block: int = 8192):
        self.sample_rate = int(sample_rate)
        self.max_block = int(max_block)
        self._resampler = (
            None if self.sample_rate == SAMPLE_RATE
            else StreamingResampler(self.sample_rate, SAMPLE_RATE, max_block)
        )
        self.delay_s = 0.0 if self._resampler is None else self._resampler.delay_s
        max_16k = ceil(max_block * SAMPLE_RATE / self.sample_rate) + 2 * HOP
        self._ring = np.zeros(WINDOW - HOP + max_16k, np.float32)
        self._filled = WINDOW - HOP
        self._frames = np.empty((max_16k // HOP + 1, N_MELS), np.float32)
        self._ring_scratch = np.empty(WINDOW, np.float32)
        self._spectrum = np.empty(len(_DFT), np.float32)
        self.frames_emitted = 0

    def push(self, block: np.ndarray) -> np.ndarray:
        block = self._checked(block)
        n = 0
        # Blocks beyond max_block are taken in pieces; only the frame buffer may grow,
        # once, for the largest block ever seen.
        needed = ceil(len(block) * SAMPLE_RATE / self.sample_rate / HOP) + 2
        if needed > len(self._frames):
            self._frames = np.empty((needed, N_MELS), np.float32)
        for offset in range(0, len(block), self.max_block):
            piece = block[offset:offset + self.max_block]
            audio = piece if self._resampler is None else self._resampler.push(piece)
            self._ring[self._filled:self._filled + len(audio)] = audio
            self._filled += len(audio)
            start = 0
            while self._filled - start >= WINDOW:
                self._frame(self._ring[start:start + WINDOW], self._frames[n])
                n += 1
                start += HOP
            # Through a scratch buffer: an overlapping in-place copy would make numpy
            # allocate a temporary.
            keep = self._filled - start
            self._ring_scratch[:keep] = self._ring[start:self._filled]
            self._ring[:keep] = self._ring_scratch[:keep]
            self._filled = keep
        self.frames_emitted += n
        return self._frames[:n]

    def _checked(self, block: np.ndarray) -> np.ndarray:
        if isinstance(block, np.ndarray) and block.dtype == np.float32 and block.ndim == 1:
            check_finite(block)
            return block
        return as_mono_float(block)

    def _frame(self, samples: np.ndarray, out: np.ndarray) -> None:
        np.dot(_DFT, samples, out=self._spectrum)
        np.multiply(self._spectrum, self._spectrum, out=self._spectrum)
        np.dot(_MEL_STACKED, self._spectrum, out=out)
        np.add(out, POWER_FLOOR, out=out)
        np.log(out, out=out)
