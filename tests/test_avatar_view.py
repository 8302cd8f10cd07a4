"""The avatar view for real: Qt + Mesa GL under Xvfb, a scripted voice and media clock."""

from __future__ import annotations

import time

import numpy as np
import pytest

from pipeline.core.frames import MouthPose
from tests.harness.avatar_view import grabbed, run_for
from tests.harness.synthetic_rig import EYES_BOX, MOUTH_BOX, H, W, synthetic_rig

pytestmark = pytest.mark.display

VISEME_SPAN = 0.1   # the scripted voice changes viseme every 100 ms


def scripted_pose(t_start: float, period: float) -> MouthPose:
    """A voice whose mouth is a known function of media time."""
    mid = t_start + period / 2
    k = int(mid // VISEME_SPAN)
    return MouthPose(k % 15, (k + 1) % 15, (mid % VISEME_SPAN) / VISEME_SPAN, 0.5)


def until_paced(app, view) -> None:
    """Run until the display clock has probed its swaps (24 of them: ~0.1 s with llvmpipe,
    longer with a slower GL or on a busy machine); probe ticks are neither paced nor logged."""
    run_for(app, 5.0, until=lambda: not view.clock.probing)
    assert not view.clock.probing, "24 swaps did not come within 5 s"


def too_slow_for_deadlines(view) -> str | None:
    """Why ticks cannot be on their deadlines here, or None. A tick is due on its grid point
    and the event loop must be free then; where a frame takes over a period from its
    deadline to the screen (softpipe: ~60 ms; llvmpipe: 3-12 ms measured), it is not."""
    latency = view.clock.latency_ms()
    if latency > 1e3 * view.period:
        return (f"frames take {latency:.0f} ms from their deadline to the screen with this GL, "
                f"over a {1e3 * view.period:.1f} ms period: ticks cannot be on time")
    return None


def record_ticks(view) -> list[tuple]:
    """Every tick the view's display clock takes from now on, as the clock saw it:
    (monotonic time, mode or "probing", grid time the tick was due at, grid-to-swap
    latency estimate in seconds, missed ticks so far, the frame slots' phase its frame is
    taken with). The grid time is the predicted presentation less the latency estimate
    (deadline mode; the tick's own time otherwise)."""
    ticks = []
    clock = view.clock
    take_tick = clock.on_tick

    def on_tick(t: float) -> None:
        take_tick(t)
        latency = clock.latency_ms() / 1e3
        mode = "probing" if clock.probing else clock.mode
        due = clock.predicted_presentation() - latency if mode == "deadline" else t
        ticks.append((t, mode, due, latency, clock.missed, view.slots.phase))

    clock.on_tick = on_tick
    return ticks


def paced(ticks, mode: str = "deadline") -> np.ndarray:
    """The recorded ticks of one mode as columns: time, due, latency, missed, phase."""
    rows = [(t, *rest) for t, m, *rest in ticks if m == mode]
    return np.array(rows, dtype=np.float64).reshape(-1, 5).T


@pytest.fixture()
def make_view(qt_app):
    from render.outputs.avatar_view import AvatarView

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
    from render.outputs.avatar_view import LATE_HELD, PRESENTED

    ticks = record_ticks(view)
    origin = time.monotonic() + 0.05          # audio starts a little after the sources
    view.set_sources(scripted_pose, lambda t: t - origin)
    until_paced(qt_app, view)
    assert view.clock.mode == "deadline"                   # Xvfb swaps do not block
    assert len(view.presentation_log()) <= 1               # probe ticks are not logged
    missed_before = view.clock.missed
    run_for(qt_app, 1.0)
    stats = view.stats()
    log = view.presentation_log()
    period = view.period
    missed = view.clock.missed - missed_before
    t, due, latency, missed_at, phase = paced(ticks)
    assert np.array_equal(log["tick"], t)                  # every paced tick logged, once

    # Deadline pacing: each prediction is a point of one t0 + n·period grid plus the swap
    # latency estimate (the grid time, not the timer's own, jittery one), one grid point
    # per tick. A grid point the machine was too busy to tick is skipped and counted, never
    # bunched: the 1 s window covers ~60 grid points, ticked or counted missed (5 of slack
    # for the window's ends). Measured on the 2-core VM at load 3.2-4.5 (18 runs): 59-60
    # ticks, none missed; in a load burst, 54 ticks and 6 missed.
    steps = np.diff(due) / period
    assert np.allclose(steps, np.round(steps), rtol=0, atol=1e-6) and (np.round(steps) >= 1).all()
    assert 55 <= len(log) + missed <= 62
    # The rate the view reports is its ticks' own. How close to 60 it comes is this
    # machine's speed (measured 59.96-60.18 at load 3.2-4.5 in 26 runs, 54.0 with 6 ticks
    # missed; 37.6 in a 369 ms stall): the pacing itself is the grid above and the tick
    # lateness below.
    span = log["tick"][-1] - log["tick"][0]
    fps = (len(log) - 1) / span
    grid_fps = round(steps.sum()) / span
    assert stats["fps"] == pytest.approx(fps)
    late = log[log["status"] != PRESENTED]
    # A frame is late only where the machine was too busy, never by the slots' doing:
    # the display missed its tick (the tick ran after the instant its frame was due on
    # screen), or a swap that late moved the latency estimate so far that the slots
    # re-phased by over period/4 (the frames made ahead no longer fit) and the starved
    # producer had not re-made the frame by the next tick, or the producer thread itself
    # was not run for longer than its 0.2 s look-ahead (it then drops the frames whose
    # time has passed, and says so). Seen once in ~40 runs at load 4-5: 3 late frames
    # with neither of the first two (the producer's figures were not kept then).
    missed_tick = log["tick"] > log["predicted"]
    rephased = np.abs(np.diff(phase, prepend=phase[0])) > period / 4
    unexplained = np.nonzero(~(missed_tick | rephased) & (log["status"] != PRESENTED))[0]
    assert len(unexplained) == 0 or stats["producer"]["dropped"] > 0, (
        f"late rows {unexplained.tolist()} of {len(log)}: producer {stats['producer']}, phase steps "
        f"{np.round(np.diff(phase) / period, 3).tolist()} periods", late)
    assert stats["late"] == stats["held"] + stats["interpolated"] == len(late)
    assert stats["held"] == int((late["status"] == LATE_HELD).sum())
    shown = log[log["status"] == PRESENTED]
    assert stats["presented"] == len(shown)
    jitter = stats["tick_jitter_ms"]
    record_property("tick_jitter_p50_ms", jitter["p50_ms"])
    record_property("tick_jitter_p99_ms", jitter["p99_ms"])
    print(f"\nXvfb tick lateness: p50 {jitter['p50_ms']:.2f} ms, p99 {jitter['p99_ms']:.2f} ms, "
          f"max {jitter['max_ms']:.2f} ms; draw p50 {stats['draw_ms']['p50']:.3f} ms, "
          f"p99 {stats['draw_ms']['p99']:.3f} ms; swap latency {stats['swap_latency_ms']:.2f} ms "
          f"({1e3 * latency.min():.2f}-{1e3 * latency.max():.2f}); fps {fps:.2f} "
          f"({grid_fps:.2f} with the missed ticks), "
          f"{missed} ticks missed, {len(late)} late ({int(rephased.sum())} re-phases over "
          f"period/4); producer {stats['producer']}")
    if len(unexplained):
        print(f"{len(unexplained)} late frames while the producer was starved "
              f"({stats['producer']['dropped']} frames dropped)")
    if len(shown) < 30:
        pytest.skip(f"the machine was too busy to show half of a second's frames on time "
                    f"({len(shown)} of {len(log) + missed}: {missed} ticks missed, {len(late)} "
                    f"frames late); frame exactness needs them")
    # Frame-exact: each shown frame was made for the middle of its time on screen. The slots
    # re-phase once the predicted phase drifts past period/8 (2.08 ms), so the slot taken
    # is centred within that (measured worst 1.57-2.06 ms, 18 runs, load 3.2-4.5); and its
    # frame was made for that slot, or (made before a re-phase and not yet re-made) for a
    # phase at most period/4 away, which the slots still hand out: 3 of 9 runs at load
    # 4-5 showed one such frame, 3.3-3.7 ms off (softpipe: 4.05 ms).
    mid = shown["heard"] + period / 2
    taken_phase = phase[log["status"] == PRESENTED]
    slot_mid = taken_phase + (np.floor((mid - taken_phase) / period) + 0.5) * period
    assert np.abs(slot_mid - mid).max() <= period / 8 + 1e-3
    made_before = np.abs(shown["stamp"] - slot_mid) > 1e-9
    assert np.abs(shown["stamp"] - slot_mid).max() <= period / 4
    print(f"frames {1e3 * np.abs(shown['stamp'] - mid).max():.2f} ms off their time at most, "
          f"{int(made_before.sum())} made for the phase before a re-phase")
    # ...and what was drawn is what the voice says for that instant.
    expected = [scripted_pose(s - period / 2, period) for s in shown["stamp"]]
    assert shown["viseme"].tolist() == [p.dominant for p in expected]
    assert np.allclose(shown["mix"], [p.mix for p in expected], atol=1e-6)
    # Ticks run on their deadlines: QTimer's whole milliseconds, rounded to the nearest,
    # put a tick within 0.5 ms of its grid time, plus the wake-up. Measured p50 0.28-0.68 ms
    # (18 runs, load 3.2-4.5). A timer armed a period from the last tick instead of to the
    # grid would slide through the period: p50 near period/2, 8.3 ms.
    if reason := too_slow_for_deadlines(view):
        pytest.skip(reason)
    assert jitter["p50_ms"] < 2.0


def test_a_frame_missing_at_its_tick_is_counted_late_and_held(qt_app, view):
    from render.outputs.avatar_view import LATE_HELD, LATE_INTERPOLATED

    stall_from = 0.5
    stall = 0.3
    stalls = []

    def stalling_pose(t_start, period):
        if t_start >= stall_from:
            began = time.monotonic()
            time.sleep(stall)   # a voice stage far past the overrun limit
            stalls.append((began, time.monotonic()))
        return scripted_pose(t_start, period)

    until_paced(qt_app, view)
    origin = time.monotonic()
    view.set_sources(stalling_pose, lambda t: t - origin)
    run_for(qt_app, 1.4)
    stats = view.stats()
    log = view.presentation_log()
    late = log[log["status"] != 0]
    assert stats["late"] > 0 and stats["late"] == len(late)
    assert set(late["status"].tolist()) <= {LATE_HELD, LATE_INTERPOLATED}
    assert stats["producer"]["overruns"] >= 1
    # The display kept ticking while the producer stalled: ticks inside every stall, and no
    # gap as long as one (a display that waited for its frame would show a 0.3 s gap, 18
    # periods). Measured largest gap 1.1-1.4 periods at load 2-2.4 (24 runs) and, when
    # other processes took the 2 cores, up to 9.5 periods (158 ms) at load 3.9, the skipped
    # ticks counted as missed: the machine's doing, not the view's.
    ticks = log["tick"]
    assert stalls, "the producer never reached the stalling frames"
    assert all(((ticks > began) & (ticks < ended)).any() for began, ended in stalls)
    gap = np.diff(ticks).max()
    print(f"\nlargest tick gap {gap / view.period:.2f} periods, {stats['missed_ticks']} missed, "
          f"{len(stalls)} stalls of {stall} s")
    assert gap < stall


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
    ticks = record_ticks(view)
    until_paced(qt_app, view)
    run_for(qt_app, 5.0, until=lambda: len(paced(ticks)[0]) >= 30)    # ~0.5 s at 60 Hz
    stats = view.stats()
    assert stats["display_mode"] == "deadline"
    assert stats["presented"] == 0 and len(view.presentation_log()) == 0
    # It ticks on the 60 Hz grid, each tick due one or more whole periods after the last
    # (the ticks a busy machine missed are counted and skipped), on its deadline (see the
    # 60 fps test). The reported rate is the ticks' own: measured 50.1-60.3 fps with 0-5
    # ticks missed (load 3.8-3.9, 6 runs), the machine's speed, not the view's.
    t, due, latency, missed_at, phase = paced(ticks)
    steps = np.diff(due) / view.period
    assert len(t) >= 30
    assert np.allclose(steps, np.round(steps), rtol=0, atol=1e-6) and (np.round(steps) >= 1).all()
    assert stats["fps"] == pytest.approx((len(t) - 1) / (t[-1] - t[0]))
    if reason := too_slow_for_deadlines(view):
        pytest.skip(reason)
    assert np.median(t - due) < 2e-3


def test_log_ring_keeps_the_newest_rows_oldest_first(qt_app, make_view):
    view = make_view(log_rows=16)
    ticks = record_ticks(view)
    until_paced(qt_app, view)
    origin = time.monotonic()
    view.set_sources(scripted_pose, lambda t: t - origin)
    run_for(qt_app, 5.0, until=lambda: view.slots.presented + view.slots.late >= 40)
    log = view.presentation_log()
    stats = view.stats()
    assert stats["presented"] + stats["late"] >= 40            # 40 rows logged, 16 kept
    assert len(log) == 16
    assert np.all(np.diff(log["tick"]) > 0)
    # The newest: exactly the last 16 ticks the view took.
    assert np.array_equal(log["tick"], paced(ticks)[0][-16:])


def test_vsync_mode_ticks_on_swaps_and_falls_back_when_they_stop_blocking(qt_app, make_view):
    from render.timing.display_clock import DEADLINE, VSYNC

    view = make_view()
    # Teach the probe that swaps block on a 60 Hz vsync; Xvfb's real swaps then do not.
    t = time.monotonic() - 1.0
    for _ in range(view.clock.probe_swaps + 1):
        view.clock.on_swap(t)
        t += view.period
    assert view.clock.mode == VSYNC and not view.clock.probing
    ticks = record_ticks(view)
    changes = []
    take_swap = view.clock.on_swap

    def on_swap(t: float):
        change = take_swap(t)
        if change is not None:
            changes.append(change)
        return change

    view.clock.on_swap = on_swap
    origin = time.monotonic()
    view.set_sources(scripted_pose, lambda t: t - origin)
    run_for(qt_app, 1.0)
    log = view.presentation_log()
    on_swaps = paced(ticks, VSYNC)[0]
    if not changes and view.clock.mode == VSYNC:
        # Swaps that take most of a period (a slow GL such as softpipe) look like vsync:
        # staying in vsync mode is right there, and the fall-back cannot be seen.
        pytest.skip(f"this GL's swaps are not fast enough to fall back from: median "
                    f"{np.median(np.diff(on_swaps)) / view.period:.2f} periods, not < 0.7")
    if changes != [DEADLINE]:
        # No swap came for 4 periods (67 ms, a stalled machine): the watchdog fell back,
        # not the run of fast swaps this test is about.
        pytest.skip(f"vsync mode ended by the no-swap watchdog, not by fast swaps ({changes})")
    assert view.stats()["display_mode"] == "deadline"
    # It ticked on the (fast) swaps first: vsync mode ends after 8 swaps in a row under
    # 0.7 periods, so the last 7 intervals between its ticks are those swaps (a slower swap
    # before them only restarts the run). Then it paced itself on the 60 Hz grid.
    assert len(on_swaps) >= 8 and np.array_equal(log["tick"][:len(on_swaps)], on_swaps)
    assert (np.diff(on_swaps)[-7:] < 0.7 * view.period).all()
    t, due, latency, missed_at, phase = paced(ticks)
    assert np.array_equal(log["tick"][len(on_swaps):], t)
    steps = np.diff(due) / view.period
    assert np.allclose(steps, np.round(steps), rtol=0, atol=1e-6) and (np.round(steps) >= 1).all()
    # Median, not mean: on 2 busy cores a timer now and then fires a slot late, and one
    # doubled interval moves a 40-interval mean by 2.5 %. Measured medians 0.992-1.004
    # periods (load 4.1-4.2, 6 runs). The ticks run on their grid times (see the 60 fps
    # test): median lateness measured 0.3-0.7 ms there; a timer armed from the last tick
    # would slide to ~period/2, 8.3 ms.
    intervals = np.diff(t)[-40:]
    lateness = (t - due)[-40:]
    print(f"\n{len(on_swaps)} ticks on swaps, then paced: median interval "
          f"{np.median(intervals) / view.period:.4f} periods, median lateness "
          f"{1e3 * np.median(lateness):.2f} ms, {int(missed_at[-1] - missed_at[0])} missed")
    assert len(intervals) >= 20
    if reason := too_slow_for_deadlines(view):
        pytest.skip(reason)
    assert np.median(intervals) == pytest.approx(view.period, rel=0.02)
    assert np.median(lateness) < 2e-3


def on_screen(view) -> np.ndarray:
    """What the X server shows where the view is, as H×W×3 RGB: the avatar's own native
    window and whatever is drawn in it, not a render of the widgets."""
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QImage

    origin = view.mapToGlobal(QPoint(0, 0))
    img = view.screen().grabWindow(0, origin.x(), origin.y(), view.width(), view.height())
    img = img.toImage().convertToFormat(QImage.Format.Format_RGBA8888)
    assert (img.width(), img.height()) == (W, H)
    return np.frombuffer(img.constBits(), dtype=np.uint8).reshape(H, W, 4)[..., :3].copy()


def test_the_avatar_is_on_screen_in_its_own_window_with_child_widgets_over_it(qt_app, view):
    from PySide6.QtGui import QColor, QPainter
    from PySide6.QtWidgets import QWidget

    class Marker(QWidget):
        """A child widget over the avatar, as the app's landmark overlay is."""

        def paintEvent(self, event):
            painter = QPainter(self)
            painter.fillRect(0, 0, 20, 20, QColor(255, 0, 0))
            painter.end()

    run_for(qt_app, 0.3)
    shown = on_screen(view)
    assert shown[60, 40].tolist() == [230, 190, 160]     # the rig, drawn in the window
    assert shown[5, 5].tolist() == [0, 0, 0]             # the clear colour, alpha dropped
    marker = Marker(view)
    marker.setGeometry(0, 0, W, H)
    marker.show()
    run_for(qt_app, 0.2)
    # The native window would hide a child widget: the view paints it into the window.
    assert on_screen(view)[5, 5].tolist() == [255, 0, 0]
    assert on_screen(view)[60, 40].tolist() == [230, 190, 160]
    assert grabbed(view)[5, 5, 3] == 0                   # a screenshot is the avatar alone
    marker.hide()
    run_for(qt_app, 0.2)
    assert on_screen(view)[5, 5].tolist() == [0, 0, 0]


def test_avatar_view_picks_the_renderer_by_rig_type(qt_app, astronaut_rig):
    from render.gl.photo_renderer import PhotoRenderer
    from render.gl.sprite_renderer import SpriteGLRenderer
    from render.outputs.avatar_view import AvatarView

    view = AvatarView(fps=60.0)
    view.resize(W, H)
    view.set_idle_motion(blinking=False, breathing=False)
    view.set_rig(astronaut_rig)
    view.show()
    try:
        run_for(qt_app, 0.3)
        assert isinstance(view.renderer, PhotoRenderer)
        photo = grabbed(view)
        # The 512² portrait letterboxed into 160×120: her face at (225, 120) of the picture
        # lands at (73, 28), with transparent bars beside the picture.
        assert photo[28, 73, 3] == 255 and photo[28, 73, 0] > 150
        assert photo[60, 5, 3] == 0 and photo[60, 150, 3] == 0
        view.set_rig(synthetic_rig())
        run_for(qt_app, 0.3)
        assert isinstance(view.renderer, SpriteGLRenderer)
        assert grabbed(view)[60, 40].tolist() == [230, 190, 160, 255]
        view.set_rig(astronaut_rig)
        run_for(qt_app, 0.3)
        assert isinstance(view.renderer, PhotoRenderer)
        assert np.array_equal(grabbed(view), photo)
    finally:
        view.shutdown()
        view.close()
        view.deleteLater()
        qt_app.processEvents()
