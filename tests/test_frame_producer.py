"""The frame producer against an injected clock: look-ahead, drops, overrun policy."""

from __future__ import annotations

import logging
import time

import pytest

from pipeline.core.frames import MouthPose
from render.timing.frame_producer import FrameProducer
from render.timing.frame_slots import FrameSlots
from tests.harness.fake_clock import FakeClock
from tests.harness.frames import taken_pose

P = 1 / 60
MEDIA_OFFSET = 100.0   # media time = monotonic - 100 s


def media(t: float) -> float:
    return t - MEDIA_OFFSET


class Voice:
    """A pose source that records its calls and can be made slow on the fake clock."""

    def __init__(self, clock: FakeClock, cost: float = 0.0) -> None:
        self.clock = clock
        self.cost = cost
        self.calls: list[float] = []

    def __call__(self, t_start: float, period: float) -> MouthPose:
        assert period == P
        self.calls.append(t_start)
        self.clock.t += self.cost
        k = round(t_start / period)
        return MouthPose(k % 15, (k + 1) % 15, 0.25, 0.5)


def make(cost: float = 0.0, lookahead: float = 0.2, count: int = 30):
    clock = FakeClock()
    voice = Voice(clock, cost)
    slots = FrameSlots(count, P)
    producer = FrameProducer(slots, voice, media, lookahead=lookahead, clock=clock)
    return clock, voice, slots, producer


def test_fills_from_now_to_the_lookahead():
    clock, voice, slots, producer = make()
    assert producer.fill() == 13                       # frames 0..12 cover 0 .. 200 ms
    assert voice.calls == pytest.approx([k * P for k in range(13)])
    assert all(taken_pose(slots, k) is not None for k in range(13))
    assert taken_pose(slots, 13) is None
    assert producer.fill() == 0                        # nothing new until time moves


def test_only_new_frames_are_made_as_time_advances():
    clock, voice, slots, producer = make()
    producer.fill()
    clock.t += 0.105
    assert producer.fill() == 6
    assert voice.calls[-6:] == pytest.approx([k * P for k in range(13, 19)])
    assert slots.dropped == 0


def test_a_frame_on_screen_now_is_still_made_but_past_ones_are_dropped():
    clock, voice, slots, producer = make()
    producer.fill()
    clock.t += 0.5                                     # the producer was descheduled
    producer.fill()
    first = int(0.5 / P)                               # its span contains now
    assert slots.dropped == first - 13
    assert voice.calls[13] == pytest.approx(first * P)


def test_lookahead_is_clamped_to_what_the_ring_holds():
    clock, voice, slots, producer = make(lookahead=5.0, count=10)
    assert producer.lookahead == pytest.approx(8 * P)
    producer.fill()
    assert all(taken_pose(slots, k) is not None for k in range(9))


def test_a_new_phase_is_filled_afresh():
    clock, voice, slots, producer = make()
    producer.fill()
    slots.align(0.004)
    assert producer.fill() == 13
    assert voice.calls[-13] == pytest.approx(0.004 - P)   # span [-P+4ms, 4ms) holds now
    assert taken_pose(slots, 5) is not None


def test_media_clock_going_back_restarts_at_now():
    clock, voice, slots, producer = make()
    clock.t += 2.0
    producer.fill()
    clock.t -= 1.0                                      # a seek back / new utterance timeline
    assert producer.fill() == 13
    assert voice.calls[-13] == pytest.approx(round(1.0 / P) * P)


def test_overrun_switches_to_degraded_mode_without_stalling(caplog):
    clock, voice, slots, producer = make(cost=3 * P)    # a frame takes 3 ticks to make
    with caplog.at_level(logging.WARNING, logger="render.timing.frame_producer"):
        # Frame 0 finished when frame 2 was due: it stops rather than fill the past.
        assert producer.fill() == 1
    assert producer.overruns == 1 and producer.degraded
    assert "degraded mode" in caplog.text
    voice.cost = 0.0
    clock.t += 0.0505                                   # media now inside frame 6
    calls = len(voice.calls)
    made = producer.fill()
    assert slots.dropped == 5                           # frames 1..5 were never made
    assert made == 13                                   # frames 6..18
    # Degraded: no blending, and one computed pose serves two frames.
    assert producer.degraded_frames == made
    assert len(voice.calls) - calls == 7
    for k in range(6, 19):
        pose = taken_pose(slots, k)
        assert pose.mix == 0.0 and pose.viseme_a == pose.viseme_b
        assert slots.taken_degraded                     # and the display can tell
    assert taken_pose(slots, 7) == taken_pose(slots, 6)


def test_a_slow_frame_discarded_by_a_rephase_still_counts_as_an_overrun():
    clock, voice, slots, producer = make()

    def slow_while_the_display_rephases(t_start, period):
        clock.t += 3 * P                                # 3 ticks to make this frame...
        slots.align(slots.phase + P / 3)                # ...while the display re-phased
        return MouthPose(1, 1, 0.0, 0.5)

    producer.pose_source = slow_while_the_display_rephases
    producer.fill()
    assert producer.overruns == 1 and producer.degraded


def test_degraded_mode_ends_after_the_hold():
    clock, voice, slots, producer = make(cost=3 * P)
    producer.fill()
    voice.cost = 0.0
    clock.t += producer.degraded_hold + 0.01
    assert not producer.degraded
    producer.fill()
    k = slots.frame_index(media(clock.t)) + 3
    assert taken_pose(slots, k).mix == 0.25 and not slots.taken_degraded


def test_runs_on_its_own_thread_and_stops():
    slots = FrameSlots(30, P)
    origin = time.monotonic()
    producer = FrameProducer(slots, lambda t, p: MouthPose(1, 2, 0.5, 0.5),
                             lambda t: t - origin, lookahead=0.1)

    def ahead() -> bool:
        now = slots.frame_index(time.monotonic() - origin)
        return all(taken_pose(slots, k) is not None for k in range(now, now + 5))

    producer.start()
    try:
        with pytest.raises(RuntimeError, match="already started"):
            producer.start()
        # Its first pass makes the 7 frames of the 0.1 s look-ahead; 10 made and the next 5
        # frames ready means it went on filling as time moved. Waited for, not slept for: it
        # polls every 4 ms, but a busy 2-core machine may not run it for longer than that (a
        # fixed 80 ms sleep found 11 made, one to spare, at load 4.4).
        deadline = time.monotonic() + 5.0
        while not (producer.produced >= 10 and ahead()) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert producer.running
        assert producer.produced >= 10 and ahead()
    finally:
        producer.stop()
    assert not producer.running
    made = producer.produced
    time.sleep(0.03)
    assert producer.produced == made                    # stopped means stopped


def test_frames_made_ahead_are_made_again_when_the_source_changes():
    slots = FrameSlots(30, 0.01)
    now = [0.0]
    says = {"viseme": 0}
    version = [0]
    producer = FrameProducer(
        slots, lambda t, p: MouthPose(says["viseme"], says["viseme"], 0.0, 0.0),
        lambda t: t, lookahead=0.1, source_version=lambda: version[0], clock=lambda: now[0],
    )
    producer.fill()
    assert taken_pose(slots, 5).dominant == 0
    says["viseme"] = 10
    producer.fill()
    assert taken_pose(slots, 5).dominant == 0  # nothing said the source changed
    version[0] += 1
    producer.fill()
    assert taken_pose(slots, 5).dominant == 10
