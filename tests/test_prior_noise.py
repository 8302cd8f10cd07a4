"""pipeline.voice.prior_noise: the prior's noise, read from one table of normals."""

import numpy as np
import pytest

from pipeline.voice import prior_noise
from pipeline.voice.streaming_tts import StreamingTTS


def test_draws_are_standard_normal_and_reproducible_by_seed():
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    draws = [prior_noise.standard_normal(a, (192, 40)) for _ in range(200)]
    assert all(d.shape == (192, 40) and d.dtype == np.float32 for d in draws)
    assert all(np.array_equal(d, prior_noise.standard_normal(b, (192, 40))) for d in draws)
    values = np.concatenate([d.ravel() for d in draws]).astype(np.float64)
    # 1.5 M values drawn from a 1 M table: their mean and spread stand within 6 standard
    # errors of the table's own size (1/sqrt(1M) = 0.001) of a standard normal's.
    assert abs(values.mean()) < 0.006
    assert abs(values.std() - 1.0) < 0.006
    # Draws start at offsets of their own, not one after another from the table's start.
    assert len({float(d[0, 0]) for d in draws}) > 190


def test_a_draw_cannot_write_into_the_table():
    draw = prior_noise.standard_normal(np.random.default_rng(0), (4, 4))
    with pytest.raises(ValueError):
        draw += 1


def test_a_draw_larger_than_half_the_table_is_generated():
    rows = prior_noise.TABLE_VALUES // 2 // 100 + 1
    draw = prior_noise.standard_normal(np.random.default_rng(0), (rows, 100))
    assert draw.shape == (rows, 100) and draw.flags.writeable


def test_a_seeded_voice_speaks_the_same_twice():
    """The voice's prior noise comes from the table at the seed's offsets: a seeded
    voice's audio repeats exactly, and another seed's differs (duration noise off, so
    that only the prior's noise can make it differ)."""
    def audio(seed: int) -> np.ndarray:
        tts = StreamingTTS(seed=seed, noise_w_scale=0.0)
        try:
            return np.concatenate([s.audio for s in tts.synthesize("Hello chat, welcome back.")])
        finally:
            tts.close()

    first = audio(3)
    assert np.array_equal(first, audio(3))
    assert not np.array_equal(audio(4), first)


def test_the_voice_makes_the_table_when_it_warms_up(monkeypatch):
    """Made on first use, the table cost the first speech after loading 19-39 ms."""
    monkeypatch.setattr(prior_noise, "_table", None)
    tts = StreamingTTS()
    try:
        tts.warm_up()
        assert prior_noise._table is not None
    finally:
        tts.close()
