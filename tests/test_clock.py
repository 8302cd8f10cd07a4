"""MediaClock against injected times: the callback's reports are built from a known truth."""

import numpy as np
import pytest

from pipeline.core.clock import MediaClock

RATE = 48000
BLOCK = 256
PERIOD = BLOCK / RATE


class FakeTime:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def feed(clock, origin, blocks, first=0, delays=None, rate_error=0.0, discontinuity_at=()):
    """Report `blocks` blocks whose samples truly reach the DAC at origin + pos / RATE
    (scaled by the device's rate error); returns the true origin per block."""
    for k in range(first, first + blocks):
        pos = k * BLOCK
        true_dac = origin + pos / RATE * (1 + rate_error)
        delay = 0.0 if delays is None else delays[k - first]
        clock.on_output_block(pos, true_dac + delay, discontinuity=k in discontinuity_at)


def test_linear_between_callbacks_and_inverse():
    clock = MediaClock(RATE, now=FakeTime())
    origin = 250.0
    feed(clock, origin, 20)
    last_dac = origin + 19 * PERIOD
    for frac in (0.0, 0.25, 0.5, 0.99):
        t = last_dac + frac * PERIOD
        assert clock.media_time_at(t) == pytest.approx(19 * PERIOD + frac * PERIOD, abs=1e-9)
    assert clock.monotonic_at(clock.media_time_at(last_dac + 0.003)) == pytest.approx(
        last_dac + 0.003, abs=1e-9)
    assert not clock.free_running


def test_late_callbacks_are_smoothed_away():
    rng = np.random.default_rng(7)
    n = 2000
    delays = rng.uniform(0.0, 0.0003, n)  # scheduling delay of the callback's time read
    delays[::10] += 0.0015  # regular GIL waits, under the jump threshold
    spikes = rng.choice(np.arange(100, n), 20, replace=False)
    delays[spikes] += 0.004  # lone long stalls, over it
    clock = MediaClock(RATE, now=FakeTime())
    origin = 10.0
    errors = []
    for k in range(n):
        feed(clock, origin, 1, first=k, delays=delays[k:k + 1])
        t = origin + k * PERIOD + PERIOD / 2
        errors.append(clock.media_time_at(t) - (k * PERIOD + PERIOD / 2))
    settled = np.abs(np.array(errors[50:]))
    assert delays.max() > 0.005
    assert settled.max() < 0.0001, settled.max()
    assert clock.anchors == 1  # the first lock only; no stall was taken for a jump


@pytest.mark.parametrize("rate_error", [250e-6, -250e-6])  # a cheap sound card
def test_follows_a_drifting_device_clock(rate_error):
    clock = MediaClock(RATE, now=FakeTime(), window=0.2)
    origin = 5.0
    feed(clock, origin, 3000, rate_error=rate_error)  # 16 s: 4 ms of drift
    errors = []
    for k in range(3000, 3400):
        feed(clock, origin, 1, first=k, rate_error=rate_error)
        t = origin + k * BLOCK / RATE * (1 + rate_error)
        errors.append(clock.media_time_at(t) - k * PERIOD)
    # The window minimum lags a slow device by at most the drift over two windows.
    assert np.abs(errors).max() <= 2 * 0.2 * abs(rate_error) + 1e-6
    assert clock.anchors == 1


def test_xrun_reanchors_after_confirmation_but_a_lone_spike_does_not():
    clock = MediaClock(RATE, now=FakeTime(), jump_confirm=4)
    origin = 1.0
    feed(clock, origin, 100)
    spike = np.zeros(1)
    spike[0] = 0.006
    feed(clock, origin, 1, first=100, delays=spike)
    feed(clock, origin, 10, first=101)
    assert clock.anchors == 1
    assert clock.media_time_at(origin + 111 * PERIOD) == pytest.approx(111 * PERIOD, abs=1e-6)

    lost = 2 * PERIOD  # two cycles skipped: our next sample plays that much later
    feed(clock, origin + lost, 3, first=111)
    assert clock.anchors == 1  # not yet: three late blocks could still be stalls
    feed(clock, origin + lost, 1, first=114)
    assert clock.anchors == 2
    t = origin + lost + 115 * PERIOD
    assert clock.media_time_at(t) == pytest.approx(115 * PERIOD, abs=1e-6)


def test_reported_discontinuity_and_early_jumps_reanchor_at_once():
    clock = MediaClock(RATE, now=FakeTime())
    origin = 1.0
    feed(clock, origin, 50)
    feed(clock, origin + 0.02, 1, first=50, discontinuity_at={50})
    assert clock.anchors == 2
    assert clock.media_time_at(origin + 0.02 + 50 * PERIOD) == pytest.approx(50 * PERIOD, abs=1e-9)
    feed(clock, origin + 0.01, 1, first=51)  # earlier than possible for a late callback
    assert clock.anchors == 3
    assert clock.media_time_at(origin + 0.01 + 51 * PERIOD) == pytest.approx(51 * PERIOD, abs=1e-9)


def test_free_running_without_a_device_then_locks_and_continues_when_lost():
    now = FakeTime(42.0)
    clock = MediaClock(RATE, now=now)
    assert clock.free_running
    now.t = 43.5
    assert clock.media_time_now() == pytest.approx(1.5)
    assert clock.media_time_at(44.0) == pytest.approx(2.0)

    feed(clock, 43.6, 10)
    assert not clock.free_running
    assert clock.media_time_at(43.7) == pytest.approx(0.1, abs=1e-9)

    clock.start_free_running()
    assert clock.free_running
    now.t = 60.0
    assert clock.media_time_now() == pytest.approx(60.0 - 43.6, abs=1e-9)
