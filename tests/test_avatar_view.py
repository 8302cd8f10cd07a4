"""The avatar view for real: Qt + Mesa GL under Xvfb, a scripted voice and media clock."""

from __future__ import annotations

import time

import numpy as np
import pytest

from pipeline.frames import MouthPose
from tests.test_gl_renderer import EYES_BOX, MOUTH_BOX, H, W, synthetic_rig

pytestmark = pytest.mark.display

VISEME_SPAN = 0.1   # the scripted voice changes viseme every 100 ms


def scripted_pose(t_start: float, period: float) -> MouthPose:
    """A voice whose mouth is a known function of media time."""
    mid = t_start + period / 2
    k = int(mid // VISEME_SPAN)
    return MouthPose(k % 15, (k + 1) % 15, (mid % VISEME_SPAN) / VISEME_SPAN, 0.5)


def run_for(app, seconds: float, until=None) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not (until and until()):
        app.processEvents()
        time.sleep(0.0005)


@pytest.fixture()
def make_view(qt_app):
    from render.avatar_view import AvatarView

    views = []

    def make(**kwargs):
        v = AvatarView(fps=60.0, **kwargs)
        v.resize(W, H)
        v.set_rig(synthetic_rig())
        v.show()
        views.append(v)
        return v

    yield make
    for v in views:
        v.shutdown()
        v.close()
        v.deleteLater()
    qt_app.processEvents()


@pytest.fixture()
def view(make_view):
    return make_view()


def test_pulls_the_heard_frame_every_tick_at_60fps(qt_app, view, record_property):
    from render.avatar_view import PRESENTED

    origin = time.monotonic() + 0.05          # audio starts a little after the sources
    view.set_sources(scripted_pose, lambda t: t - origin)
    run_for(qt_app, 5.0, until=lambda: not view.clock.probing)
    assert view.clock.mode == "deadline"                   # Xvfb swaps do not block
    assert len(view.presentation_log()) <= 1               # probe ticks are not logged
    run_for(qt_app, 1.0)
    stats = view.stats()
    log = view.presentation_log()
    period = view.period

    assert 55 <= len(log) <= 62
    fps = (len(log) - 1) / (log["tick"][-1] - log["tick"][0])
    # Under load a tick or two may be skipped (never bunched): ~60, not exactly 60.
    assert 57.5 < fps < 61.5
    assert 57.5 < stats["fps"] < 61.5
    late = log[log["status"] != PRESENTED]
    # A frame is late only where the display itself missed its tick (the tick ran after
    # the instant its frame was due on screen): a busy machine, never the slots.
    assert len(late) <= 2 and np.all(late["tick"] > late["predicted"]), late
    assert stats["late"] == stats["fallback"] == len(late)
    shown = log[log["status"] == PRESENTED]
    assert stats["presented"] == len(shown)
    # Frame-exact: each shown frame was made for the middle of its time on screen...
    error = shown["stamp"] - (shown["heard"] + period / 2)
    assert np.abs(error).max() <= period / 8 + 1e-3
    # ...and what was drawn is what the voice says for that instant.
    expected = [scripted_pose(s - period / 2, period) for s in shown["stamp"]]
    assert shown["viseme"].tolist() == [p.dominant for p in expected]
    assert np.allclose(shown["mix"], [p.mix for p in expected], atol=1e-6)
    # Presentation instants sit on a 60 Hz grid (consecutive predictions one period apart).
    # The grid-to-swap latency estimate moves a little under load; by less than the
    # period/8 that would re-phase the frame slots.
    assert np.allclose(np.diff(log["predicted"]), period, atol=period / 8)
    jitter = stats["tick_jitter_ms"]
    record_property("tick_jitter_p50_ms", jitter["p50_ms"])
    record_property("tick_jitter_p99_ms", jitter["p99_ms"])
    print(f"\nXvfb tick lateness: p50 {jitter['p50_ms']:.2f} ms, p99 {jitter['p99_ms']:.2f} ms, "
          f"max {jitter['max_ms']:.2f} ms; draw p50 {stats['draw_ms']['p50']:.3f} ms, "
          f"p99 {stats['draw_ms']['p99']:.3f} ms; swap latency {stats['swap_latency_ms']:.2f} ms; "
          f"fps {fps:.2f}; producer {stats['producer']}")
    assert jitter["p50_ms"] < 2.0


def test_a_frame_missing_at_its_tick_is_counted_late_and_held(qt_app, view):
    from render.avatar_view import LATE_HELD, LATE_INTERPOLATED

    stall_from = 0.5

    def stalling_pose(t_start, period):
        if t_start >= stall_from:
            time.sleep(0.3)   # a voice stage far past the overrun limit
        return scripted_pose(t_start, period)

    origin = time.monotonic()
    view.set_sources(stalling_pose, lambda t: t - origin)
    run_for(qt_app, 1.4)
    stats = view.stats()
    log = view.presentation_log()
    late = log[log["status"] != 0]
    assert stats["late"] > 0 and stats["late"] == len(late)
    assert set(late["status"].tolist()) <= {LATE_HELD, LATE_INTERPOLATED}
    assert stats["producer"]["overruns"] >= 1
    # The display kept its rate while the producer stalled.
    ticks = log["tick"]
    assert np.diff(ticks).max() < 3 * view.period


def grabbed(view) -> np.ndarray:
    from PySide6.QtGui import QImage

    img = view.grab().convertToFormat(QImage.Format.Format_RGBA8888)
    assert (img.width(), img.height()) == (W, H)
    return np.frombuffer(img.constBits(), dtype=np.uint8).reshape(H, W, 4).copy()


def test_screenshot_shows_the_rig(qt_app, view):
    run_for(qt_app, 0.3)
    pixels = grabbed(view)
    assert pixels[60, 40].tolist() == [230, 190, 160, 255]
    assert pixels[0, 0, 3] == 0
    assert (pixels[MOUTH_BOX][..., 3] == 255).any()
    assert pixels[EYES_BOX][..., 3].min() == 255


def test_background_colour_and_idle_motion_switches(qt_app, view):
    view.set_clear_color((0.0, 0.0, 1.0, 1.0))
    view.set_idle_motion(blinking=False, breathing=False)
    run_for(qt_app, 0.2)
    still = grabbed(view)
    assert still[0, 0].tolist() == [0, 0, 255, 255]
    run_for(qt_app, 0.5)
    assert np.array_equal(grabbed(view), still)        # no breathing, no blinking: frozen


def test_idle_avatar_ticks_without_a_voice_and_logs_nothing(qt_app, view):
    run_for(qt_app, 0.6)
    stats = view.stats()
    assert stats["display_mode"] == "deadline"
    assert 50 < stats["fps"] < 61.5
    assert stats["presented"] == 0 and len(view.presentation_log()) == 0


def test_log_ring_keeps_the_newest_rows_oldest_first(qt_app, make_view):
    view = make_view(log_rows=16)
    origin = time.monotonic()
    view.set_sources(scripted_pose, lambda t: t - origin)
    run_for(qt_app, 0.7)
    log = view.presentation_log()
    assert view.stats()["presented"] > 16
    assert len(log) == 16
    assert np.all(np.diff(log["tick"]) > 0)
    assert time.monotonic() - log["tick"][-1] < 3 * view.period


def test_vsync_mode_ticks_on_swaps_and_falls_back_when_they_stop_blocking(qt_app, make_view):
    from render.display_clock import VSYNC

    view = make_view()
    # Teach the probe that swaps block on a 60 Hz vsync; Xvfb's real swaps then do not.
    t = time.monotonic() - 1.0
    for _ in range(view.clock.probe_swaps + 1):
        view.clock.on_swap(t)
        t += view.period
    assert view.clock.mode == VSYNC and not view.clock.probing
    origin = time.monotonic()
    view.set_sources(scripted_pose, lambda t: t - origin)
    run_for(qt_app, 1.0)
    log = view.presentation_log()
    intervals = np.diff(log["tick"])
    assert view.stats()["display_mode"] == "deadline"
    # It ticked on the (fast) swaps first, then paced itself on the 60 Hz grid.
    assert (intervals[:5] < 0.7 * view.period).all()
    # Median and share, not mean: on 2 busy cores a timer now and then fires a slot late,
    # and one doubled interval moves a 40-interval mean by 2.5 %.
    paced = intervals[-40:]
    assert np.median(paced) == pytest.approx(view.period, rel=0.02)
    assert np.mean(np.abs(paced - view.period) < 0.2 * view.period) >= 0.9
