import numpy as np
import pytest

from pipeline.core.sync_metrics import viseme_change_offsets

PERIOD = 1 / 60


def _screen(onsets, visemes, shift, period=PERIOD, duration=2.0):
    """What a display shows: at heard time h, the viseme of h + period/2 + shift."""
    heard = np.arange(0, duration, period)
    index = np.searchsorted(onsets, heard + period / 2 + shift, side="right") - 1
    return heard, visemes[np.clip(index, 0, None)]


def test_an_exact_display_has_offsets_within_half_a_tick():
    onsets = np.array([0.0, 0.31, 0.52, 0.9, 1.33, 1.71])
    visemes = np.array([0, 10, 1, 13, 2, 0])
    heard, shown = _screen(onsets, visemes, 0.0)
    report = viseme_change_offsets(heard, shown, onsets, visemes, 0.1)
    assert len(report.offsets_ms) == 5 and report.unmatched == 0
    assert np.all(np.abs(report.offsets_ms) <= PERIOD * 500 + 1e-6)


def test_a_late_display_shows_its_lateness():
    onsets = np.array([0.0, 0.31, 0.52, 0.9, 1.33, 1.71])
    visemes = np.array([0, 10, 1, 13, 2, 0])
    heard, shown = _screen(onsets, visemes, -0.040)  # showing what was heard 40 ms ago
    report = viseme_change_offsets(heard, shown, onsets, visemes, 0.1)
    assert report.median_ms == pytest.approx(40, abs=PERIOD * 500 + 1)


def test_changes_far_from_any_onset_are_counted_not_averaged():
    heard = np.array([0.0, 0.1, 0.2, 0.3])
    shown = np.array([0, 10, 10, 0])
    onsets = np.array([0.1])
    report = viseme_change_offsets(heard, shown, onsets, np.array([10]), 0.05)
    assert list(report.offsets_ms) == [0.0]
    assert report.unmatched == 1
