"""Streaming log-mel features: same numbers as the batch path, no allocation per block."""

import tracemalloc

import numpy as np
import pytest

from pipeline.lipsync.features import (
    N_MELS,
    StreamingLogMel,
    StreamingResampler,
    as_mono_float,
    file_features,
    log_mel,
)


def _speechlike(rate: int, seconds: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(0)
    t = np.arange(int(rate * seconds)) / rate
    tone = 0.3 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 3 * t))
    return (tone + 0.02 * rng.standard_normal(len(t))).astype(np.float32)


def test_streaming_matches_batch_at_16k_for_any_block_size():
    audio = _speechlike(16_000)
    stream = StreamingLogMel(16_000)
    parts = [stream.push(audio[i:i + 137]).copy() for i in range(0, len(audio), 137)]
    streamed = np.concatenate(parts)
    batch = log_mel(audio)
    assert streamed.shape == batch.shape == (100, N_MELS)
    assert np.max(np.abs(streamed - batch)) < 1e-3


@pytest.mark.parametrize("rate", [8_000, 44_100, 48_000, 96_000])
def test_other_rates_resample_to_the_same_features(rate):
    audio = _speechlike(rate)
    stream = StreamingLogMel(rate)
    block = rate // 100
    streamed = np.concatenate([stream.push(audio[i:i + block]).copy()
                               for i in range(0, len(audio), block)])
    batch = file_features(audio, rate)
    assert len(streamed) == len(batch) == 100
    # Causal FIR vs zero-phase resampling differ by under a millisecond of delay.
    assert np.median(np.abs(streamed[5:] - batch[5:])) < 0.2


@pytest.mark.parametrize("rate", [48_000, 44_100])
def test_resampler_is_one_causal_fir_whatever_the_blocks(rate):
    audio = _speechlike(rate, 0.3)
    outputs = []
    for block in (1, 256, 4096):
        resampler = StreamingResampler(rate)
        outputs.append(np.concatenate([resampler.push(audio[i:i + block]).copy()
                                       for i in range(0, len(audio), block)]))
    assert len({len(o) for o in outputs}) == 1
    assert all(np.allclose(outputs[0], o, atol=1e-6) for o in outputs[1:])
    if resampler.up == 1:
        # Whole-number ratio: output j is the filter over inputs up to 3j, nothing else.
        taps = resampler._bank[0][::-1]
        reference = np.convolve(audio.astype(np.float64), taps)[::resampler.down]
        assert np.allclose(outputs[0], reference[:len(outputs[0])], atol=1e-5)


@pytest.mark.parametrize("rate, block", [(16_000, 160), (48_000, 480), (44_100, 441)])
def test_no_allocation_per_block(rate, block):
    stream = StreamingLogMel(rate)
    audio = _speechlike(rate, 0.5)[:block]
    for _ in range(20):
        stream.push(audio)
    tracemalloc.start()
    try:
        for _ in range(200):
            stream.push(audio)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # One frame's spectrum alone is over 1 KB: any array made per block would show.
    assert peak < 4096


def test_silence_is_finite_and_constant():
    frames = log_mel(np.zeros(16_000, np.float32))
    assert np.all(np.isfinite(frames))
    assert np.ptp(frames) == 0.0


def test_integer_stereo_and_24_bit_input_are_scaled():
    pcm16 = (np.stack([_speechlike(16_000)] * 2, axis=1) * 32767).astype(np.int16)
    assert np.allclose(as_mono_float(pcm16), _speechlike(16_000), atol=1e-4)
    pcm24 = (_speechlike(16_000).astype(np.float64) * 2**23).astype(np.int32) << 8
    assert np.allclose(as_mono_float(pcm24), _speechlike(16_000), atol=1e-4)


@pytest.mark.parametrize("bad, message", [
    (np.array([0.0, np.nan], np.float32), "NaN"),
    (np.full(10, 3000.0, np.float32), "scaled"),
    (np.zeros((2, 2, 2), np.float32), "mono"),
    (np.array(["a", "b"]), "numeric"),
])
def test_bad_input_is_refused_clearly(bad, message):
    with pytest.raises(ValueError, match=message):
        StreamingLogMel(16_000).push(bad)
