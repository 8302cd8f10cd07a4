"""Blinks and breathing: statistics over simulated minutes, determinism, bounds."""

from __future__ import annotations

import numpy as np
import pytest

from render.timing import idle_motion as im

STEP = 0.002


def sampled(fn, seconds: float, seed: int, start: float = 0.0) -> np.ndarray:
    return np.array([fn(t, seed) for t in np.arange(start, start + seconds, STEP)])


def closures(weights: np.ndarray) -> np.ndarray:
    """Times at which the lids start to close (weight leaves 0)."""
    moving = weights > 0
    return np.nonzero(moving[1:] & ~moving[:-1])[0] * STEP


@pytest.fixture(scope="module")
def ten_minutes() -> np.ndarray:
    return sampled(im.blink, 600.0, seed=7)


def test_blink_weight_is_a_lid_closure_between_0_and_1(ten_minutes):
    assert ten_minutes.min() == 0.0 and ten_minutes.max() == pytest.approx(1.0, abs=1e-3)
    assert (ten_minutes > 0).mean() < 0.06              # eyes are open almost always


def test_blinks_come_every_4_seconds_on_average_2_to_6_apart(ten_minutes):
    starts = closures(ten_minutes)
    gaps = np.diff(starts)
    episodes = gaps[gaps > 1.0]                         # between blinks, not within doubles
    assert 3.6 < episodes.mean() < 4.4
    assert episodes.min() >= 2.0 - 0.35 and episodes.max() <= 6.0
    assert episodes.std() > 0.4                         # jittered, not a metronome


def test_some_blinks_are_double(ten_minutes):
    gaps = np.diff(closures(ten_minutes))
    doubles = gaps[gaps < 1.0]
    singles = gaps[gaps >= 1.0]
    assert 0.04 < len(doubles) / len(singles) < 0.25
    assert doubles.min() >= 0.2 and doubles.max() <= 0.35


def test_a_blink_lasts_about_150_ms_and_closes_fast():
    start = im.blink_start(3, seed=7)
    w = sampled(im.blink, 0.4, seed=7, start=start - 0.1)
    closed = np.nonzero(w > 0)[0]
    duration = (closed[-1] - closed[0] + 1) * STEP
    assert 0.13 <= duration <= 0.17
    shut = int(np.argmax(w))
    assert w[shut] == pytest.approx(1.0, abs=1e-3)
    assert (shut - closed[0]) < (closed[-1] - shut)     # closing is quicker than opening


def test_same_seed_same_blinks_in_any_order_other_seed_other_blinks():
    times = np.linspace(0, 120, 20_000)
    forward = [im.blink(t, 5) for t in times]
    backward = [im.blink(t, 5) for t in times[::-1]][::-1]
    assert forward == backward
    assert forward != [im.blink(t, 6) for t in times]


def test_breathing_is_bounded_and_slow():
    b = sampled(im.breathing, 600.0, seed=1)
    assert b.min() >= -1.0 and b.max() <= 1.0 and b.max() > 0.99
    rises = np.count_nonzero((b[1:] > 0) & (b[:-1] <= 0))
    assert 150 * 0.9 < rises < 150 * 1.1                # ~0.25 Hz over 10 minutes
    # No step bigger than a smooth 0.25 Hz sine (with wander) allows.
    assert np.abs(np.diff(b)).max() < 2 * np.pi * 0.35 * STEP


def test_breathing_moves_the_figure_under_one_percent():
    for breath in (-1.0, 0.0, 1.0):
        offset, scale = im.breath_transform(breath)
        assert abs(offset) < 0.01 and abs(scale - 1.0) < 0.01
    assert im.breath_transform(1.0)[0] > im.breath_transform(-1.0)[0]
