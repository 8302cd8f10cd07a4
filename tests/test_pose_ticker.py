"""The pose ticker (render/timing/pose_ticker.py) on an injected clock: ticks on its
deadline grid, frames made for what is heard when they are seen (the delivery plus the
output's latency), and its own thread handing frames to sinks."""

from __future__ import annotations

import threading
import time

from pipeline.core.frames import MouthPose
from render.timing.pose_ticker import PoseTicker
from tests.harness.fake_clock import FakeClock

FPS = 50.0
P = 1 / FPS


def _pose(t_start: float, period: float) -> MouthPose:
    """A pose that names its media time: viseme = the frame number mod 15."""
    k = round(t_start / period)
    return MouthPose(k % 15, k % 15, 0.0, 0.5)


def test_frames_are_made_for_what_is_heard_once_the_latency_has_passed():
    clock = FakeClock(10.0)
    ticker = PoseTicker(FPS, now=clock, latency_s=0.1)
    ticker.presenter.set_sources(_pose, lambda t: t - 10.0, start=False)
    shown = []
    wake = ticker.presenter.clock.next_deadline() - clock.t
    for _ in range(120):
        clock.t += wake
        ticker.presenter.producer.fill()
        frame, wake = ticker.step(clock.t)
        if frame is not None:
            ticker.delivered(clock.t)  # handed over at once: seen latency_s later
            shown.append((clock.t, frame))
    # On the grid: one frame a period, each a period after the one before.
    times = [t for t, _ in shown]
    assert len(shown) >= 115 and max(b - a for a, b in zip(times, times[1:])) < P + 1e-9
    # The ticker starts from the latency it was given (and the deliveries confirm it):
    # from the first frame, each shows the media time heard 100 ms after its tick, the
    # frame made for the span [stamp - P/2, stamp + P/2) that holds it.
    for t, frame in shown:
        assert abs(frame.heard - (t - 10.0 + 0.1)) < 1e-9
        assert abs(frame.stamp - frame.heard) <= P / 2 + 1e-9
        assert frame.pose.viseme_a == round((frame.stamp - P / 2) / P) % 15


def test_on_its_thread_every_sink_gets_every_frame_and_a_broken_one_is_dropped():
    ticker = PoseTicker(FPS)
    got, broken_calls = [], []

    def broken(frame) -> None:
        broken_calls.append(frame)
        raise RuntimeError("a sink bug")

    ticker.sinks += [broken, got.append]
    ticker.set_sources(_pose, lambda t: t)
    before = set(threading.enumerate())
    ticker.start()
    time.sleep(0.5)
    ticker.stop()
    assert len(broken_calls) == 1
    # 0.5 s at 50 fps: 25 ticks; a loaded 2-core machine may skip a few grid points.
    assert 15 <= len(got) <= 26
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive()]
