"""The presenter against an injected clock: what each tick shows, and what it counts.

The producer is the real one, driven pass by pass (`fill()`) on the same fake clock, so
every case is exact and nothing sleeps; one case runs its thread to show that a stage
that never returns does not stop the ticks.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pipeline.core.avatar_state import AvatarState, blend_into
from pipeline.core.frames import MouthPose
from render.timing import idle_motion
from render.timing.display_clock import DEADLINE, VSYNC
from render.timing.presenter import (
    IDLE,
    LATE_HELD,
    LATE_INTERPOLATED,
    PRESENTED,
    Presenter,
)
from tests.harness.fake_clock import FakeClock
from tests.harness.paced_presenter import P, media, paced, tick


class Voice:
    """A pose source that is a known function of media time, records its calls and can be
    made slow on the fake clock."""

    def __init__(self, clock: FakeClock, cost: float = 0.0) -> None:
        self.clock = clock
        self.cost = cost
        self.calls: list[float] = []

    def __call__(self, t_start: float, period: float) -> MouthPose:
        self.calls.append(t_start)
        self.clock.t += self.cost
        return expected(t_start, period)


def expected(t_start: float, period: float) -> MouthPose:
    k = round(t_start / period)
    return MouthPose(k % 15, (k + 1) % 15, 0.25, (k % 7) / 7)


def with_voice(cost: float = 0.0, **kwargs):
    clock = FakeClock()
    presenter = paced(clock, **kwargs)
    voice = Voice(clock, cost)
    presenter.set_sources(voice, media, start=False)
    return clock, voice, presenter


def test_on_time_frames_are_shown_at_their_heard_time_and_counted():
    clock, voice, presenter = with_voice()
    presenter.producer.fill()
    frames = [tick(presenter, clock) for _ in range(10)]
    assert [f.status for f in frames] == [PRESENTED] * 10
    for f in frames:
        # No swaps yet: the frame is seen at its grid time, and made for the middle of
        # its span on screen, which begins at the heard instant.
        assert f.predicted == pytest.approx(f.tick)
        assert f.heard == pytest.approx(media(f.predicted))
        assert f.stamp == pytest.approx(f.heard + P / 2, abs=P / 8)
        assert f.pose == expected(f.stamp - P / 2, P)
        assert not f.degraded
    stats = presenter.stats()
    assert (stats["presented"], stats["late"], stats["held"], stats["interpolated"]) == (10, 0, 0, 0)
    log = presenter.presentation_log()
    assert log["tick"].tolist() == [f.tick for f in frames]
    assert (log["status"] == PRESENTED).all()


def test_early_frames_wait_in_their_slots_for_their_tick():
    clock, voice, presenter = with_voice()
    made = presenter.producer.fill()               # 200 ms of frames, made at once
    assert made == 13
    first = tick(presenter, clock)
    # The frames made ahead are not shown early: this tick took the one for its heard
    # time, and each later tick takes its own, with no pass of the producer between.
    later = [tick(presenter, clock) for _ in range(8)]
    assert len(voice.calls) == made
    stamps = [first.stamp] + [f.stamp for f in later]
    assert all(f.status == PRESENTED for f in later)
    assert [b - a for a, b in zip(stamps, stamps[1:])] == pytest.approx([P] * 8)


def test_a_frame_not_made_by_its_tick_is_held_and_counted_late():
    clock, voice, presenter = with_voice()
    made = presenter.producer.fill()
    shown = [tick(presenter, clock) for _ in range(made)]
    assert all(f.status == PRESENTED for f in shown)
    # The producer was not run for longer than its look-ahead: the next tick's frame was
    # never made, nor are its neighbours there. The tick does not wait: it holds.
    late = tick(presenter, clock)
    assert late.status == LATE_HELD
    assert late.pose == shown[-1].pose and late.stamp == shown[-1].stamp
    again = tick(presenter, clock)
    assert again.status == LATE_HELD and again.pose == shown[-1].pose
    stats = presenter.stats()
    assert (stats["presented"], stats["late"], stats["held"], stats["interpolated"]) == (made, 2, 2, 0)
    log = presenter.presentation_log()
    assert log["status"].tolist()[-2:] == [LATE_HELD, LATE_HELD]
    # Once the producer runs again, the ticks show their own frames again.
    presenter.producer.fill()
    assert tick(presenter, clock).status == PRESENTED


def test_a_frame_missing_between_two_made_ones_is_interpolated():
    clock, voice, presenter = with_voice()
    presenter.producer.fill()
    tick(presenter, clock)
    # The producer is re-making the next tick's frame just as the tick reads it (its
    # slot marked mid-write): that frame cannot be taken, its neighbours can.
    slots = presenter.slots
    k = slots.frame_index(media(presenter.clock.next_presentation()) + P / 2)
    slots.seq[k % slots.count] = -1
    before, after, midway = AvatarState(), AvatarState(), AvatarState()
    assert slots.take_state(k - 1, before) and slots.take_state(k + 1, after)
    blend_into(midway, before, after, 0.5)
    frame = tick(presenter, clock)
    assert frame.status == LATE_INTERPOLATED
    assert frame.pose == midway.mouth_pose()
    # The whole avatar is interpolated, eyelids and breathing too.
    assert frame.state.values.tolist() == midway.values.tolist()
    assert frame.stamp == pytest.approx(slots.frame_start(k) + P / 2)
    stats = presenter.stats()
    assert (stats["late"], stats["held"], stats["interpolated"]) == (1, 0, 1)
    assert stats["late"] == stats["held"] + stats["interpolated"]


def test_a_stage_overrunning_two_ticks_degrades_and_never_stalls_the_ticks():
    clock, voice, presenter = with_voice(cost=3 * P)   # a frame takes 3 ticks to make
    assert presenter.producer.fill() == 1
    assert presenter.degraded and presenter.producer.stats()["overruns"] == 1
    # The display's ticks go on, each with a frame at once, and presenting never calls
    # the source. (One clock for both here: the first tick runs when the slow frame is
    # done, 3 periods late; it shows that frame, made for its grid time, and the grid
    # points it skipped are counted missed.) Then the frames not made are held.
    calls = len(voice.calls)
    frames = [tick(presenter, clock) for _ in range(4)]
    assert len(voice.calls) == calls
    assert [f.status for f in frames] == [PRESENTED] + [LATE_HELD] * 3
    assert presenter.clock.missed >= 2
    assert all(f.pose == frames[0].pose for f in frames)
    # The producer, degraded, makes cheaper frames (no cross-fade, one pose for two
    # frames) and catches up; the frames it made so are shown, and say so.
    voice.cost = 0.0
    presenter.producer.fill()
    degraded = [tick(presenter, clock) for _ in range(6)]
    assert all(f.status == PRESENTED and f.degraded for f in degraded)
    assert all(f.pose.mix == 0.0 and f.pose.viseme_a == f.pose.viseme_b for f in degraded)
    stats = presenter.stats()
    assert stats["degraded_shown"] == 6 and stats["producer"]["degraded"]
    # Once the hold is over (1 s of ticks, the producer keeping up), full frames again,
    # after the degraded ones made ahead (the look-ahead, 0.2 s) are shown.
    for _ in range(round((presenter.producer.degraded_hold + presenter.lookahead) / P) + 2):
        presenter.producer.fill()
        full = tick(presenter, clock)
    assert not presenter.degraded
    assert full.status == PRESENTED and not full.degraded and full.pose.mix == 0.25


def test_a_stage_that_never_returns_does_not_stop_the_ticks():
    clock = FakeClock()
    presenter = paced(clock)
    entered, release = threading.Event(), threading.Event()

    def stuck(t_start: float, period: float) -> MouthPose:
        entered.set()
        release.wait(10.0)
        return expected(t_start, period)

    presenter.set_sources(stuck, media)                # its own thread, as in the app
    try:
        assert entered.wait(5.0), "the producer never asked for a frame"
        frames = [tick(presenter, clock) for _ in range(30)]
        assert [f.status for f in frames] == [LATE_HELD] * 30
        assert presenter.stats()["late"] == 30
    finally:
        release.set()
        presenter.shutdown()


def test_ticks_that_pass_with_no_frame_are_counted_and_two_in_a_row_are_a_stall():
    cpu = FakeClock(0.0)  # the ticking thread's CPU time: it runs a millisecond a tick
    clock, voice, presenter = with_voice(thread_time=cpu)
    def ticked() -> dict:
        cpu.t += 0.001
        presenter.producer.fill()
        tick(presenter, clock)
        return presenter.stats()

    for _ in range(5):
        stats = ticked()
    assert (stats["missed_ticks"], stats["stalls"]) == (0, 0)
    assert stats["longest_tick_gap_ms"] == pytest.approx(P * 1e3)
    late = 0.001          # ticks a millisecond past their grid point, as a timer fires
    clock.t += P + late   # one due tick passes with no frame: missed, not a stall
    stats = ticked()
    assert (stats["missed_ticks"], stats["stalls"]) == (1, 0)
    clock.t += 3 * P + late  # three in a row: a stall, the display frozen for 4 periods
    stats = ticked()
    assert (stats["missed_ticks"], stats["stalls"], stats["busy_stalls"]) == (4, 1, 0)
    assert stats["longest_tick_gap_ms"] == pytest.approx(4 * P * 1e3)
    assert stats["longest_tick_gap_last_minute_ms"] == stats["longest_tick_gap_ms"]
    # A minute of steady ticks later, the last minute's longest gap is a period again;
    # the longest overall stays.
    for _ in range(61 * 60):
        stats = ticked()
    assert stats["longest_tick_gap_last_minute_ms"] == pytest.approx(P * 1e3)
    assert stats["longest_tick_gap_ms"] == pytest.approx(4 * P * 1e3)
    assert (stats["missed_ticks"], stats["stalls"]) == (4, 1)
    # A stall its own thread was on a CPU through (work of 3 periods between two ticks):
    # the app's own, whatever the machine did.
    clock.t += 2 * P + late
    cpu.t += 3 * P
    stats = ticked()
    assert (stats["missed_ticks"], stats["stalls"], stats["busy_stalls"]) == (6, 2, 1)


def test_idle_ticks_blink_and_breathe_and_count_nothing():
    clock = FakeClock()
    presenter = paced(clock, seed=3)
    frames = [tick(presenter, clock) for _ in range(5)]
    for f in frames:
        assert f.status == IDLE
        assert f.blink == idle_motion.blink(f.predicted, 3)
        assert f.breath == idle_motion.breathing(f.predicted, 3)
    presenter.set_idle_motion(blinking=False, breathing=False)
    still = tick(presenter, clock)
    assert still.blink == 0.0 and still.breath == 0.0
    stats = presenter.stats()
    assert stats["presented"] == stats["late"] == 0 and len(presenter.presentation_log()) == 0
    assert stats["fps"] == pytest.approx(60.0)


def test_idle_ticks_show_the_avatar_motion_at_the_media_time_they_are_seen():
    from pipeline.core.avatar_state import EXPRESSIONS
    from render.timing.avatar_motion import AvatarMotion, MotionStrengths, placement

    clock = FakeClock()
    presenter = paced(clock)
    strengths = MotionStrengths(sway=1.0)
    motion = AvatarMotion(lambda: media(clock.t), strengths=strengths, fade_seconds=0.1)
    motion.set_offered(("happy",))
    presenter.set_avatar_motion(motion)
    motion.set_expression("happy")
    frames = [tick(presenter, clock) for _ in range(10)]
    happy = [f.state.expressions[EXPRESSIONS.index("happy")] for f in frames]
    assert happy[0] > 0.0 and happy[-1] == 1.0 and happy == sorted(happy)
    last = frames[-1]
    assert last.state.placement() == placement(last.state.openness, media(last.predicted), strengths)


def test_vsync_ticks_on_swaps_and_falls_back_to_deadlines_when_they_stop():
    clock = FakeClock()
    presenter = Presenter(60.0, now=clock)
    for _ in range(presenter.clock.probe_swaps + 1):    # swaps that block on a 60 Hz vsync
        clock.t += P
        presenter.swapped(clock.t)
    assert presenter.clock.mode == VSYNC
    presenter.set_sources(Voice(clock), media, start=False)
    presenter.producer.fill()
    clock.t += P
    frame, wake = presenter.swapped(clock.t)
    # A frame per swap, seen one refresh later; a watchdog of 4 periods in case swaps stop.
    assert frame.status == PRESENTED and frame.predicted == pytest.approx(clock.t + P)
    assert wake == pytest.approx(4 * P)
    clock.t += wake
    frame, wake = presenter.timer_fired(clock.t)
    assert frame is None and presenter.clock.mode == DEADLINE and wake == pytest.approx(P)


def test_with_a_voice_blinks_and_breathing_come_through_the_slots_made_for_the_frame():
    # The producer fills in idle motion at each frame's own media time (the stamp), as
    # a tracker's or the API's state will be: frame-exact like the mouth.
    clock = FakeClock(100.0 + 3.3)  # seed 5 blinks at 3.49 s of media time
    presenter = paced(clock, seed=5)
    voice = Voice(clock)
    presenter.set_sources(voice, media, start=False)
    blinks = []
    for _ in range(60):
        presenter.producer.fill()
        f = tick(presenter, clock)
        assert f.status == PRESENTED
        assert f.blink == idle_motion.blink(f.stamp, 5)
        assert f.breath == idle_motion.breathing(f.stamp, 5)
        assert f.state.values[4] == f.state.values[5] == f.blink  # both eyes
        blinks.append(f.blink)
    assert max(blinks) > 0.5  # a blink lay within the second shown


def test_the_tick_log_is_resident_from_the_start_not_as_it_fills():
    # The log's pages are all written at construction: left as calloc's zeros they were
    # mapped row by row over its first wrap, and the hour's soak counted 1.5 MB per output
    # as growth (/proc's smaps of the idle app: four 1,512 kB mappings, each growing). In a
    # process of its own: in this one malloc may hand back pages an earlier test made
    # resident, which would hide the difference.
    code = (
        "import os\n"
        "from render.timing.presenter import LOG_DTYPE, Presenter\n"
        "def resident():\n"
        "    with open('/proc/self/statm') as f:\n"
        "        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')\n"
        "before = resident()\n"
        "presenters = [Presenter(log_rows=36_000) for _ in range(4)]\n"
        "print(resident() - before, 4 * 36_000 * LOG_DTYPE.itemsize)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    grown, logs = map(int, done.stdout.split())
    assert grown >= 0.9 * logs, (grown, logs)
