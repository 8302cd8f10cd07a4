"""A presenter on the fake clock, as the tests of what it shows drive it: its display clock
pacing by deadlines (Xvfb's free-running swaps), each timer run by hand at its deadline,
media time a fixed offset from the clock's."""

from __future__ import annotations

import pytest

from render.timing.display_clock import DEADLINE
from render.timing.presenter import Presenter
from tests.harness.fake_clock import FakeClock

P = 1 / 60  # the display period, 60 Hz
MEDIA_OFFSET = 100.0   # media time = monotonic - 100 s


def media(t: float) -> float:
    return t - MEDIA_OFFSET


def paced(clock: FakeClock, **kwargs) -> Presenter:
    """A presenter whose display clock has probed 24 free-running swaps (5 ms apart, as
    Xvfb's) and chosen deadline pacing; the fake clock stands at its first deadline."""
    presenter = Presenter(60.0, now=clock, **kwargs)
    wake = None
    for _ in range(presenter.clock.probe_swaps + 1):
        clock.t += 0.005
        frame, wake = presenter.swapped(clock.t)
    assert presenter.clock.mode == DEADLINE and not presenter.clock.probing
    assert frame is None and wake == pytest.approx(P)     # first deadline: a period on
    clock.t += wake
    return presenter


def tick(presenter: Presenter, clock: FakeClock):
    """Run the timer the presenter asked for at its deadline; the clock moves to the next."""
    frame, wake = presenter.timer_fired(clock.t)
    clock.t += wake
    return frame
