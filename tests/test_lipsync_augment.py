"""The training corpus's microphone stages (packaging/lipsync_data.py) do what they are
named for: checked on signals whose answer is known, not by listening."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packaging"))
import lipsync_data  # noqa: E402

RATE = lipsync_data.SAMPLE_RATE


def band_energy(audio: np.ndarray, lo: float, hi: float) -> float:
    spectrum = np.abs(np.fft.rfft(audio)) ** 2
    f = np.fft.rfftfreq(len(audio), 1 / RATE)
    return float(spectrum[(f >= lo) & (f < hi)].sum())


def test_band_limit_removes_what_the_lower_rate_cannot_carry():
    noise = np.random.default_rng(0).standard_normal(RATE).astype(np.float32) * 0.1
    for seed in range(6):
        out = lipsync_data._band_limit(np.random.default_rng(seed), noise)
        assert out.shape == noise.shape and out.dtype == np.float32
        # Every rate it picks is at most 12 kHz: nothing is left above 6.2 kHz (the
        # resampler's transition band), while the speech band keeps its energy.
        assert band_energy(out, 6200, 8000) < 1e-3 * band_energy(noise, 6200, 8000)
        assert band_energy(out, 300, 3000) > 0.9 * band_energy(noise, 300, 3000)


def test_codec_keeps_the_signal_and_drops_the_quiet_partials():
    t = np.arange(RATE) / RATE
    loud, quiet = np.sin(2 * np.pi * 500 * t), 10 ** (-40 / 20) * np.sin(2 * np.pi * 3000 * t)
    audio = (0.5 * (loud + quiet)).astype(np.float32)
    dropped = 0
    for seed in range(12):
        out = lipsync_data._codec(np.random.default_rng(seed), audio)
        assert out.shape == audio.shape and np.all(np.isfinite(out))
        # The loud partial survives either kind of codec: its level within half of the
        # coarsest quantizer step (4 dB), 2 dB.
        level_db = 10 * np.log10(band_energy(out, 450, 550) / band_energy(audio, 450, 550))
        assert abs(level_db) <= 2.0
        # A perceptual coder keeps bins within 12-30 dB of the frame's peak: the partial
        # 40 dB down is gone; mu-law keeps it (its steps are finer than 40 dB there).
        dropped += band_energy(out, 2950, 3050) < 0.01 * band_energy(audio, 2950, 3050)
    assert 0 < dropped < 12  # both kinds were drawn


def test_dynamics_compress_loud_speech_against_quiet():
    t = np.arange(2 * RATE) / RATE
    envelope = np.where(t < 1, 0.02, 0.8)  # a quiet second, then a loud one
    audio = (envelope * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    for seed in range(6):
        out = lipsync_data._dynamics(np.random.default_rng(seed), audio)
        assert out.shape == audio.shape and np.all(np.isfinite(out))
        quiet_gain = np.std(out[2000:15000]) / np.std(audio[2000:15000])
        loud_gain = np.std(out[-12000:]) / np.std(audio[-12000:])
        # The compressor works on the loud part (ratio >= 2 over a threshold at least
        # 10 dB below the peak) and never raises anything; a gate, where drawn, only
        # lowers the quiet part further.
        assert loud_gain < 0.9 and quiet_gain <= 1.0 + 1e-6


def test_augment_stays_in_range_at_full_strength():
    speech = np.random.default_rng(1).standard_normal(RATE).astype(np.float32) * 0.2
    for seed in range(20):
        out = lipsync_data.augment(speech, np.random.default_rng(seed), 1.0)
        assert out.shape == speech.shape and out.dtype == np.float32
        assert np.all(np.isfinite(out)) and np.max(np.abs(out)) <= 1.0
