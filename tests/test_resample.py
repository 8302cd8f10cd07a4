import numpy as np
import pytest

from pipeline.audio.resample import StreamResampler, resample


def tone(freq, rate, seconds):
    return np.sin(2 * np.pi * freq * np.arange(int(rate * seconds)) / rate).astype(np.float32)


def test_piper_rate_to_jack_rate_keeps_the_waveform():
    x = tone(1000, 22050, 1.0)
    y = resample(x, 22050, 48000)
    assert y.dtype == np.float32
    assert len(y) == 48000
    expected = np.sin(2 * np.pi * 1000 * np.arange(len(y)) / 48000)
    assert np.abs(y - expected)[500:-500].max() < 0.005


def test_downsampling_removes_what_the_new_rate_cannot_hold():
    x = tone(15000, 48000, 0.5)  # above 22,050 Hz's Nyquist frequency
    y = resample(x, 48000, 22050)
    assert len(y) == 11025
    assert np.sqrt(np.mean(y[200:-200] ** 2)) < 0.01


def test_same_rate_is_an_exact_float32_copy():
    x = np.linspace(-1, 1, 101)
    y = resample(x, 48000, 48000)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, x.astype(np.float32))
    assert y is not x


def test_rejects_nonsense_rates():
    with pytest.raises(ValueError):
        resample(np.zeros(10), 0, 48000)


def test_chunked_stream_equals_whole_resampling():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, 22050).astype(np.float32)
    whole = resample(x, 22050, 48000)
    stream = StreamResampler(22050, 48000)
    cuts = [0, 1, 257, 1000, 1001, 5000, 13000, 22050]
    parts = [stream.process(x[a:b], last=(b == len(x))) for a, b in zip(cuts, cuts[1:])]
    joined = np.concatenate(parts)
    assert len(joined) == len(whole) == 48000
    np.testing.assert_allclose(joined, whole, atol=1e-6)


def test_output_lag_before_the_flush_is_bounded():
    from pipeline.audio.resample import StreamResampler

    stream = StreamResampler(22050, 48000)
    out = stream.process(np.zeros(2205, np.float32))
    # Everything but the filter's right half (< 30 input samples) is out already.
    assert len(out) >= (2205 - 30) * 48000 // 22050


def test_resamplers_of_one_ratio_share_one_filter_that_none_can_change():
    # Made once per ratio: making it took 0.8 ms of every sentence's first chunk.
    first, second = StreamResampler(22050, 48000), StreamResampler(22050, 48000)
    assert first._weights is second._weights
    assert StreamResampler(16000, 48000)._weights is not first._weights
    with pytest.raises(ValueError):
        first._weights[0, 0] = 1.0
