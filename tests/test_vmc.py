"""The VMC output against a real VMC receiver: python-osc's own UDP server on 127.0.0.1,
recording every datagram as it arrives, fed by a real speech timeline scheduled on a
free-running media clock, as the app feeds it.

Each frame the output sends is paired with the AvatarFrame its ticker handed over (a
second sink after the output's, on the same thread, so the n-th frame is the n-th
datagram: loopback UDP loses nothing at 60 datagrams a second, and the counts are
checked equal). What a frame must hold follows from how the presenter makes it: the
frame stamped s was made by the producer as `timeline.frame_pose(s - period/2, period)`
(frame_producer.py: frame k covers [phase + k·period, +period), stamped at its middle,
frame_slots.py), blinks from idle_motion at s; and it was taken for the media time
heard when it is seen, its arrival plus the offset, so that instant lies in its span.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest

from pipeline.core.avatar_state import EXPRESSIONS, INDEX, AvatarState
from pipeline.core.clock import MediaClock
from pipeline.core.frames import MouthPose, PhonemeTiming
from pipeline.core.mouth_shapes import VOWELS, VRM1_VOWELS, mouth_shape
from pipeline.core.visemes import VISEME_INDEX
from pipeline.voice.speech_timeline import SpeechTimeline
from pipeline.voice.viseme_track import VisemeTrack
from render.outputs.contract import OutputError
from render.outputs.vmc import BLEND_APPLY, BLEND_VAL, NAMES, VmcOutput
from render.timing import idle_motion
from render.timing.presenter import PRESENTED, AvatarFrame
from tests.harness.vmc_receiver import Datagram, Receiver

FPS = 60.0
PERIOD = 1.0 / FPS
# Frames before this are left out of the checks: the display clock learns the delivery
# latency (the offset included) as a running average of gain 0.1 from 0, so a 100 ms
# offset is within 1 ms of itself after 44 ticks (0.73 s at 60 fps); by then the speech
# (scheduled 0.3 s in) has begun too.
WARM_UP_S = 1.0
MEASURED_S = 2.0
# How far the learnt delivery delay (a running average, pulled up by late ticks) may be
# above the median one: measured up to 1.9 ms with both cores of the VM kept busy.
MEDIAN_SLACK_MS = 2.0
# float32 on the wire: weights of 0..1 are within 6e-8 of what was sent.
WIRE = 1e-6


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.stop()


def wait_for(condition, timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def sockets_open() -> int:
    return sum(os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
               for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}"))


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- a speech on the media clock -------------------------------------------------------

# Vowels, closures and consonants of several lengths, so frames cross blends and rests.
SPANS = [("aa", 0.12), ("PP", 0.06), ("E", 0.09), ("oh", 0.12), ("ih", 0.06), ("SS", 0.09),
         ("ou", 0.12), ("kk", 0.06), ("aa", 0.09), ("FF", 0.06), ("oh", 0.09), ("nn", 0.06),
         ("E", 0.12), ("CH", 0.06), ("ih", 0.09), ("RR", 0.06)]


def speech(seconds: float) -> VisemeTrack:
    phonemes, t = [], 0.0
    while t < seconds:
        for viseme, length in SPANS:
            phonemes.append(PhonemeTiming(viseme, viseme, t, t + length))
            t += length
    return VisemeTrack(phonemes)


@dataclass
class Shown:
    """What the ticker handed over for one frame (copied: the state is the presenter's)."""

    tick: float
    stamp: float
    status: int
    degraded: bool
    state: np.ndarray


@dataclass
class Run:
    clock: MediaClock
    timeline: SpeechTimeline
    output: VmcOutput
    shown: list[Shown]
    datagrams: list[Datagram]
    started: float

    def measured(self) -> list[tuple[Shown, Datagram]]:
        return [(s, d) for s, d in zip(self.shown, self.datagrams)
                if s.tick >= self.started + WARM_UP_S]


def speak_through(receiver: Receiver, names: str, offset_s: float) -> Run:
    """Open the output towards `receiver`, let it send a speech for WARM_UP_S +
    MEASURED_S, close it, and keep what was handed over and what arrived."""
    clock = MediaClock(22050)
    timeline = SpeechTimeline()
    timeline.schedule(speech(WARM_UP_S + MEASURED_S + 1.0), clock.media_time_now() + 0.3)
    output = VmcOutput("127.0.0.1", receiver.port, names=names, fps=FPS, offset_s=offset_s)
    shown: list[Shown] = []

    def record(frame: AvatarFrame) -> None:
        shown.append(Shown(frame.tick, frame.stamp, frame.status, frame.degraded,
                           frame.state.values.copy()))

    output.ticker.sinks.append(record)
    output.set_sources(timeline.frame_pose, clock.media_time_at, timeline.version)
    started = time.monotonic()
    output.start()
    time.sleep(WARM_UP_S + MEASURED_S)
    output.close()
    assert wait_for(lambda: len(receiver.datagrams) >= output.sent, 1.0)
    return Run(clock, timeline, output, shown, list(receiver.datagrams), started)


def percentiles(values) -> tuple[float, float, float]:
    p1, p50, p99 = np.percentile(np.asarray(values) * 1e3, (1, 50, 99))
    return float(p1), float(p50), float(p99)


def check_run(run: Run, names: str, offset_s: float) -> dict:
    """Every check on one run; returns the figures measured (ms), for the report."""
    output, blend = run.output, NAMES[names]
    # Every frame handed over was sent, and arrived, each as one bundle.
    assert output.failed == 0
    assert output.sent == len(run.shown) == len(run.datagrams)
    expected_names = list(blend.all)
    for shown, datagram in zip(run.shown, run.datagrams):
        assert datagram.bundle
        addresses = [a for a, _ in datagram.messages]
        assert addresses == [BLEND_VAL] * len(expected_names) + [BLEND_APPLY]
        assert [args[0] for _, args in datagram.messages[:-1]] == expected_names
        assert datagram.messages[-1][1] == ()
        # The frame sent is the frame handed over: its pose's vowels, blinks, expressions.
        sent = [args[1] for _, args in datagram.messages[:-1]]
        state = AvatarState(shown.state)
        assert sent[:5] == pytest.approx(mouth_shape(state.mouth_pose()).vowels, abs=WIRE)
        assert sent[5:7] == pytest.approx([shown.state[INDEX["blink_left"]],
                                           shown.state[INDEX["blink_right"]]], abs=WIRE)
        assert sent[7:] == pytest.approx(list(state.expressions), abs=WIRE)

    # Frame rate: deadline ticks, one per grid point t0 + n·period, skipped grid points
    # counted (missed_ticks). So the datagrams span (count - 1 + missed) periods, give
    # or take one: the first's and last's lateness after their grid points (each under
    # a period, or that tick would have been skipped).
    arrivals = [d.arrival for d in run.datagrams]
    span = arrivals[-1] - arrivals[0]
    missed = output.ticker.stats()["missed_ticks"]
    assert abs(len(arrivals) - 1 + missed - span * FPS) <= 1.0
    assert missed <= 0.05 * len(arrivals)

    measured = run.measured()
    assert len(measured) >= 0.95 * MEASURED_S * FPS
    presented = [(s, d) for s, d in measured if s.status == PRESENTED and not s.degraded]
    assert len(presented) >= 0.9 * len(measured)
    spoken = 0
    for shown, datagram in presented:
        # The frame stamped s is the timeline's pose for the period centred on s, and
        # idle motion's blink at s.
        pose = run.timeline.frame_pose(shown.stamp - PERIOD / 2, PERIOD)
        vowels = [args[1] for _, args in datagram.messages[:5]]
        assert vowels == pytest.approx(mouth_shape(pose).vowels, abs=WIRE)
        blink = idle_motion.blink(shown.stamp)
        blinks = [args[1] for _, args in datagram.messages[5:7]]
        assert blinks == pytest.approx([blink, blink], abs=WIRE)
        spoken += max(vowels) > 0.3
    assert spoken >= 0.3 * len(presented)  # the checks above saw a mouth that speaks

    # Timing: the frame is seen from its arrival + offset (the receiving app's delay)
    # until the next one's, one period later, and was made for the media span heard
    # then: its stamp, the span's middle, is heard half a period after it is seen. The
    # presenter takes the frame for the heard time predicted at its grid point plus the
    # latency it learnt (a running average of the delivery delay, plus the offset) and
    # lines frame spans up with its ticks within period/8 (frame_slots.align). So the
    # median is -period/2 within period/8 and MEDIAN_SLACK_MS; each frame's arrival lies
    # within one period of its stamp being heard.
    heard = [d.arrival + offset_s - run.clock.monotonic_at(s.stamp) for s, d in presented]
    p1, p50, p99 = percentiles(heard)
    assert abs(p50 + PERIOD / 2 * 1e3) <= PERIOD / 8 * 1e3 + MEDIAN_SLACK_MS
    assert -PERIOD * 1e3 <= p1 and p99 <= PERIOD * 1e3
    # Delivery: each datagram arrives within a period of the tick that made it.
    delivery = [d.arrival - s.tick for s, d in measured]
    d1, d50, d99 = percentiles(delivery)
    assert 0.0 <= d1 and d99 <= PERIOD * 1e3
    return {"frames": len(run.shown), "measured": len(measured), "presented": len(presented),
            "rate_fps": (len(arrivals) - 1) / span, "missed": missed,
            "arrival+offset-heard(stamp) p1/p50/p99 ms": (p1, p50, p99),
            "arrival-tick p1/p50/p99 ms": (d1, d50, d99)}


# -- the tests -------------------------------------------------------------------------

def test_frames_arrive_at_the_frame_rate_as_vrm0_bundles_made_for_what_is_heard(receiver):
    run = speak_through(receiver, "vrm0", 0.0)
    figures = check_run(run, "vrm0", 0.0)
    print("vrm0, offset 0:", figures)
    assert run.output.status().detail == (f"VMC → 127.0.0.1:{receiver.port}, VRM 0.x blend "
                                          "shapes A I U E O, 60 fps")


def test_with_an_offset_frames_are_made_for_what_is_heard_that_long_after_they_arrive(receiver):
    # VRM 1.0 names here; a 100 ms offset: each frame's stamp is heard 100 ms (and half
    # a period) after it arrives, so the receiving app, showing it 100 ms later, is on time.
    run = speak_through(receiver, "vrm1", 0.1)
    figures = check_run(run, "vrm1", 0.1)
    print("vrm1, offset 100 ms:", figures)
    ahead = [run.clock.monotonic_at(s.stamp) - d.arrival for s, d in run.measured()
             if s.status == PRESENTED]
    assert float(np.median(ahead)) == pytest.approx(0.1 + PERIOD / 2,
                                                    abs=PERIOD / 8 + MEDIAN_SLACK_MS / 1e3)
    assert run.output.status().detail.endswith("VRM 1.0 blend shapes aa ih ou ee oh, 60 fps, "
                                               "sent 100 ms early")


@pytest.mark.parametrize("names, expected", [
    ("vrm0", (*VOWELS, "Blink_L", "Blink_R", "Joy", "Angry", "Sorrow", "Fun", "Surprised")),
    ("vrm1", (*VRM1_VOWELS, "blinkLeft", "blinkRight", *EXPRESSIONS)),
])
def test_one_frame_is_its_blend_shapes_by_name_then_apply_in_one_bundle(receiver, names, expected):
    state = AvatarState()
    pose = MouthPose(VISEME_INDEX["aa"], VISEME_INDEX["E"], 0.25, 0.6)
    state.set_mouth(pose)
    state.set_blink(0.25, 0.75)
    state.expressions[:] = (0.1, 0.2, 0.3, 0.4, 0.5)
    frame = AvatarFrame(0.0, 0.0, 0.0, 0.0, pose, 0.75, 0.0, PRESENTED, False, state)
    output = VmcOutput("127.0.0.1", receiver.port, names=names)
    try:
        output.send(frame)
        assert wait_for(lambda: receiver.datagrams)
    finally:
        output.close()
    (datagram,) = receiver.datagrams
    assert datagram.bundle
    assert [a for a, _ in datagram.messages] == [BLEND_VAL] * 12 + [BLEND_APPLY]
    assert tuple(args[0] for _, args in datagram.messages[:-1]) == expected
    weights = [args[1] for _, args in datagram.messages[:-1]]
    assert weights == pytest.approx([*mouth_shape(pose).vowels, 0.25, 0.75, 0.1, 0.2, 0.3,
                                     0.4, 0.5], abs=WIRE)
    assert max(weights[:5]) > 0.3


def test_a_host_that_cannot_be_found_is_one_line_for_the_user():
    threads, sockets = set(threading.enumerate()), sockets_open()
    with pytest.raises(OutputError) as raised:
        VmcOutput("no-such-host.invalid", 39539)
    message = str(raised.value)
    assert "no-such-host.invalid" in message and "cannot be found" in message
    assert "\n" not in message
    with pytest.raises(OutputError, match="port 0"):
        VmcOutput("127.0.0.1", 0)
    assert set(threading.enumerate()) == threads and sockets_open() == sockets


def test_with_no_receiver_listening_it_keeps_sending_without_error():
    output = VmcOutput("127.0.0.1", free_udp_port(), fps=FPS)
    output.start()
    try:
        assert wait_for(lambda: output.sent >= 10)
        status = output.status()
    finally:
        output.close()
    assert status.state == "on" and status.problem is None
    assert status.figures["failed"] == 0


def test_a_failing_send_is_counted_and_told_and_sending_goes_on():
    # Linux refuses a datagram to the broadcast address from a socket without
    # SO_BROADCAST (EACCES): a send error at every frame, as a host unreachable is.
    output = VmcOutput("255.255.255.255", free_udp_port(), fps=FPS)
    output.start()
    try:
        assert wait_for(lambda: output.failed >= 5)
        first = output.status()
        assert wait_for(lambda: output.failed >= first.figures["failed"] + 5)
        assert any(t.name == "vmc" for t in threading.enumerate())
    finally:
        output.close()
    assert first.state == "trouble"
    assert first.figures["sent"] == 0
    assert first.problem.startswith("VMC frames to 255.255.255.255:")
    assert "refused" in first.problem and "Permission denied" in first.problem
    assert "still trying" in first.problem and "\n" not in first.problem


def test_close_leaves_no_thread_and_no_socket(receiver):
    threads, sockets = set(threading.enumerate()), sockets_open()
    clock = MediaClock(22050)
    timeline = SpeechTimeline()
    timeline.schedule(speech(1.0), clock.media_time_now())
    output = VmcOutput("127.0.0.1", receiver.port, fps=FPS)
    output.set_sources(timeline.frame_pose, clock.media_time_at, timeline.version)
    output.start()
    assert wait_for(lambda: len(receiver.datagrams) >= 5)
    assert {t.name for t in set(threading.enumerate()) - threads} == {"vmc", "frame-producer"}
    assert sockets_open() == sockets + 1
    output.close()
    assert set(threading.enumerate()) == threads
    assert sockets_open() == sockets
    assert output.status().figures["sent"] >= 5  # what it counted stays readable


def test_weights_go_out_as_vrm_weights_and_an_internal_error_is_told(receiver):
    # Weights beyond 0..1 (a future source's) are sent clamped, NaN as 0: struct cannot
    # pack a float32 past its range, and raising there would stop the output.
    state = AvatarState()
    state.expressions[:] = (1e40, float("nan"), -3.0, 0.5, 2.0)
    frame = AvatarFrame(0.0, 0.0, 0.0, 0.0, state.mouth_pose(), 0.0, 0.0, PRESENTED, False,
                        state)
    output = VmcOutput("127.0.0.1", receiver.port, fps=FPS)
    output.send(frame)
    assert wait_for(lambda: receiver.datagrams)
    assert [args[1] for _, args in receiver.datagrams[0].messages[7:-1]] == [1.0, 0.0, 0.0,
                                                                           0.5, 1.0]
    # A pose no table knows (viseme 99) makes the sink raise: the ticker drops it, and
    # the status says the output stopped instead of "on".
    clock = MediaClock(22050)
    output.set_sources(lambda t, period: MouthPose(99, 99, 0.0, 1.0), clock.media_time_at)
    output.start()
    try:
        assert wait_for(lambda: output.send not in output.ticker.sinks)
        status = output.status()
    finally:
        output.close()
    assert status.state == "trouble" and "internal error" in status.problem
