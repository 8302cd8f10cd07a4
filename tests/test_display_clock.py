"""Display tick pacing and vsync detection against an injected clock."""

from __future__ import annotations

import random

import pytest

from render.timing.display_clock import DEADLINE, VSYNC, DisplayClock
from tests.harness.fake_clock import FakeClock

P = 1 / 60


def probed(swap_intervals, period=P) -> DisplayClock:
    clock = DisplayClock(period, FakeClock(50.0))
    t = 10.0
    clock.on_swap(t)
    for interval in swap_intervals:
        t += interval
        clock.on_tick(t)
        clock.on_swap(t)
    return clock


def deadline_clock() -> DisplayClock:
    clock = DisplayClock(P, FakeClock(), probe_swaps=4)
    clock.fall_back_to_deadline(-P)                # grid from 0.0 on, no probing
    assert not clock.probing and clock.next_deadline() == pytest.approx(0.0)
    return clock


def test_deadline_pacing_holds_the_grid_without_drift():
    clock = deadline_clock()
    rng = random.Random(1)
    for n in range(36_000):                        # ten minutes of ticks
        due = clock.next_deadline()
        assert due == pytest.approx(n * P, abs=1e-9)
        clock.on_tick(due + rng.uniform(0.0, 0.004))   # timers fire a little late
    assert clock.next_deadline() == pytest.approx(36_000 * P, abs=1e-9)
    assert clock.missed == 0
    jitter = clock.jitter()
    assert 1.8 < jitter["p50_ms"] < 2.2 and 3.8 < jitter["p99_ms"] <= 4.0


def test_missed_ticks_are_skipped_not_bunched():
    clock = deadline_clock()
    clock.on_tick(0.0)
    clock.on_tick(P + 3.5 * P)                     # the tick due at P ran 3.5 periods late
    assert clock.missed == 3
    assert clock.next_deadline() == pytest.approx(5 * P)
    clock.on_tick(5 * P)
    assert clock.next_deadline() == pytest.approx(6 * P)


def test_an_early_timer_does_not_tick_the_same_deadline_twice():
    clock = deadline_clock()
    clock.on_tick(0.0)
    clock.on_tick(P - 0.0004)                      # whole-millisecond timers can fire early
    assert clock.next_deadline() == pytest.approx(2 * P)
    assert clock.missed == 0


def test_swaps_that_block_on_vsync_select_vsync():
    rng = random.Random(2)
    clock = probed([P + rng.gauss(0, 0.0002) for _ in range(24)])
    assert not clock.probing
    assert clock.mode == VSYNC


def test_free_running_swaps_select_deadline():
    rng = random.Random(3)
    intervals = [0.007 + rng.uniform(0, 0.001) for _ in range(24)]
    clock = probed(intervals)
    assert clock.mode == DEADLINE
    # The grid starts one period after the swap that decided.
    assert clock.next_deadline() == pytest.approx(10.0 + sum(intervals) + P)


def test_irregular_swaps_near_the_period_select_deadline():
    rng = random.Random(4)
    clock = probed([P + rng.uniform(-0.006, 0.006) for _ in range(24)])
    assert clock.mode == DEADLINE


def test_a_screen_of_another_refresh_rate_is_not_taken_for_ours():
    clock = probed([1 / 144] * 24)
    assert clock.mode == DEADLINE


def test_probe_decides_once_it_has_enough_swaps():
    clock = probed([P] * 23)
    assert clock.probing and clock.mode == DEADLINE
    t = 10.0 + 24 * P
    clock.on_tick(t)
    assert clock.on_swap(t) == VSYNC
    assert not clock.probing


def test_vsync_that_stops_blocking_falls_back_to_deadline():
    clock = probed([P] * 24)
    assert clock.mode == VSYNC
    t = 10.0 + 24 * P                               # the probe's last swap
    changes = []
    while clock.mode == VSYNC and len(changes) < 20:
        t += 0.004
        clock.on_tick(t)
        changes.append(clock.on_swap(t))
    assert changes == [None] * 7 + [DEADLINE]      # a run of 8 fast swaps, not one
    assert clock.next_deadline() == pytest.approx(t + P)


def test_presentation_prediction_in_vsync_mode_is_one_refresh_after_the_tick():
    clock = probed([P] * 24)
    t = 10.0 + 25 * P                               # the refresh after the probe's last
    clock.on_tick(t)
    assert clock.predicted_presentation() == pytest.approx(t + P)
    assert clock.next_presentation() == pytest.approx(t + 2 * P)
    clock.on_tick(t + P + 0.0005)
    jitter = clock.jitter()
    assert jitter["samples"] == 2
    assert jitter["max_ms"] == pytest.approx(0.5, abs=1e-6)


def test_presentation_prediction_in_deadline_mode_learns_the_swap_latency():
    clock = deadline_clock()
    for _ in range(120):
        due = clock.next_deadline()
        clock.on_tick(due + 0.0005)
        clock.on_swap(due + 0.003)                 # composited 3 ms after the grid time
    assert clock.latency_ms() == pytest.approx(3.0, abs=0.01)
    due = clock.next_deadline()
    clock.on_tick(due + 0.001)
    assert clock.predicted_presentation() == pytest.approx(due + 0.003, abs=1e-5)
    assert clock.next_presentation() == pytest.approx(due + P + 0.003, abs=1e-5)


def test_a_single_late_swap_moves_the_prediction_only_a_little():
    clock = deadline_clock()
    for _ in range(60):
        due = clock.next_deadline()
        clock.on_tick(due)
        clock.on_swap(due + 0.003)
    due = clock.next_deadline()
    clock.on_tick(due)
    clock.on_swap(due + 0.023)                     # one 20 ms hiccup
    assert clock.latency_ms() < 3.0 + 0.2 * 20


def test_extra_swaps_without_a_tick_do_not_count_as_latency():
    clock = deadline_clock()
    clock.on_tick(0.0)
    clock.on_swap(0.002)
    before = clock.latency_ms()
    clock.on_swap(0.012)                           # an expose repaint, not a tick's frame
    assert clock.latency_ms() == before
