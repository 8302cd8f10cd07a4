"""Issue 24: a lip closure the mic's smoother shows for 20 ms reaches a display frame at
any frame rate, and one a frame's centre shows anyway is not shown by another."""

import numpy as np
import pytest

from pipeline.audio.input import AudioInput, CapturedBlock
from pipeline.core.frames import MouthPose
from pipeline.core.visemes import VISEME_INDEX
from pipeline.lipsync.mic import MicLipSync

RATE, HOP = 48_000, 480  # 10 ms hops, as the lip-shape model publishes them
START = 5.0  # capture instant of the first hop (monotonic seconds)
DELAY = 0.030
PP, FF, AA, E, SIL = (VISEME_INDEX[v] for v in ("PP", "FF", "aa", "E", "sil"))
FPS = (12, 15, 24, 25, 29.97, 30, 50, 60, 120, 144)


def shown(viseme: int) -> MouthPose:
    """A pose as the smoother publishes it once switched: fully ``viseme``."""
    return MouthPose(AA, viseme, 1.0, 0.0 if viseme in (PP, FF) else 0.6)


class Replayed:
    """An analyser replaying fixed poses, one a hop: the input of the stage under test.
    Each pose describes its hop's first sample, so hop k is captured at START + k · 10 ms."""

    def __init__(self, visemes: list[int]):
        self.poses = [shown(v) for v in visemes]
        self.hops = 0

    def __call__(self, block: np.ndarray, sample_rate: int) -> list[tuple[float, MouthPose]]:
        k, self.hops = self.hops, self.hops + 1
        return [(k * HOP / sample_rate, self.poses[k])]


def stage_for(visemes: list[int], muted_hops: range = range(0)) -> MicLipSync:
    stage = MicLipSync(AudioInput("system"), Replayed(visemes), lambda t: t, delay=DELAY,
                       clock=lambda: 0.0)
    block = np.zeros(HOP, dtype=np.float32)
    for k in range(len(visemes)):
        stage.muted = k in muted_hops
        stage.feed(CapturedBlock(block, START + k * HOP / RATE, k * HOP, RATE))
    return stage


def frames(stage: MicLipSync, fps: float, phase: float,
           until: float) -> list[tuple[float, MouthPose]]:
    """(capture instant at the centre, frame_pose) of every frame from START on, the
    frames' centres ``phase`` of a period after a period boundary: media time is
    monotonic time here, and a frame shows the voice captured ``delay`` before it."""
    period = 1.0 / fps
    out = []
    n = 0
    while START + (n + phase) * period < until:
        t_start = START + (n + phase) * period + DELAY - period / 2
        # The centre as frame_pose reckons it, to the last bit (hops fall on round times).
        centre = t_start + period / 2 - DELAY
        out.append((centre, stage.frame_pose(t_start, period)))
        n += 1
    return out


def phases(count: int = 37) -> list[float]:
    return [(j + 0.5) / count for j in range(count)]


def showing(poses: list[tuple[float, MouthPose]], viseme: int) -> list[int]:
    return [n for n, (_, pose) in enumerate(poses) if pose.dominant == viseme]


@pytest.mark.parametrize("fps", [30, 24])
def test_a_20_ms_closure_between_two_frame_centres_is_shown_by_exactly_one_frame(fps):
    visemes = [AA] * 20 + [PP] * 2 + [AA] * 20  # PP captured over [5.20, 5.22)
    stage = stage_for(visemes)
    between = 0
    for phase in phases():
        poses = frames(stage, fps, phase, START + 0.42)
        at_centre = [n for n, (c, _) in enumerate(poses)
                     if stage.pose_at_monotonic(c).dominant == PP]
        between += not at_centre
        assert len(showing(poses, PP)) == 1, (fps, phase)
        if at_centre:
            assert showing(poses, PP) == at_centre
        else:
            # The frame whose interval (previous centre, centre] holds the closure.
            (n,) = showing(poses, PP)
            assert poses[n - 1][0] < START + 0.20 and poses[n][0] >= START + 0.22 - 1e-9
    assert between > 0  # some phases put the whole closure between two centres


def test_a_closure_at_a_frame_centre_is_shown_by_that_frame_and_not_the_next():
    visemes = [AA] * 20 + [PP] * 3 + [AA] * 20  # PP over [5.20, 5.23)
    stage = stage_for(visemes)
    period = 1 / 30
    centre = START + 0.205  # in PP's first hop; the next centre's interval holds the rest
    pose = stage.frame_pose(centre + DELAY - period / 2, period)
    assert pose.dominant == PP and pose == stage.pose_at_monotonic(centre)
    later = stage.frame_pose(centre + period + DELAY - period / 2, period)
    assert later.dominant == AA and later == stage.pose_at_monotonic(centre + period)


@pytest.mark.parametrize("fps", FPS)
def test_at_any_frame_rate_every_closure_reaches_a_frame_and_none_is_shown_twice(fps):
    """Frames showing each closure: those whose centre shows it, or else exactly one."""
    closures = [(PP, 2), (FF, 2), (PP, 3), (FF, 5), (PP, 2)]
    # 250 ms of open vowels apart: the frames near one closure are not near another.
    gap = [E, AA, AA, E, AA] * 5
    visemes = list(gap)
    spans = []
    for viseme, hops in closures:
        spans.append((viseme, START + len(visemes) * 0.01, START + (len(visemes) + hops) * 0.01))
        visemes += [viseme] * hops + gap
    stage = stage_for(visemes)
    end = START + len(visemes) * 0.01
    for phase in phases(11):
        poses = frames(stage, fps, phase, end)
        for viseme, begin, until in spans:
            # Shown by the frames whose interval reaches into the closure's hops.
            near = [n for n, (c, p) in enumerate(poses)
                    if p.dominant == viseme and begin - 1.5 / fps < c < until + 1.5 / fps]
            at_centre = [n for n, (c, _) in enumerate(poses)
                         if begin - 1e-9 <= c < until - 1e-9]
            assert near == (at_centre or near[:1]) and len(near) >= 1, (fps, phase, begin)


def test_of_two_closures_in_one_frame_interval_the_longer_is_shown():
    period = 1 / 15  # 67 ms: room for two closures between centres
    centre = START + 0.105
    # Hops 4..10 lie in (centre - period, centre]: PP 3 hops, then FF 2, then open.
    stage = stage_for([AA] * 4 + [PP] * 3 + [AA] + [FF] * 2 + [AA] * 10)
    assert stage.pose_at_monotonic(centre).dominant == AA
    assert stage.frame_pose(centre + DELAY - period / 2, period).dominant == PP
    # The longer one later, too.
    stage = stage_for([AA] * 4 + [FF] * 2 + [AA] + [PP] * 3 + [AA] * 10)
    assert stage.frame_pose(centre + DELAY - period / 2, period).dominant == PP


def test_of_two_equally_long_closures_the_later_is_shown():
    period = 1 / 15
    centre = START + 0.105
    stage = stage_for([AA] * 4 + [PP] * 2 + [AA] * 2 + [FF] * 2 + [AA] * 10)
    assert stage.frame_pose(centre + DELAY - period / 2, period).dominant == FF
    stage = stage_for([AA] * 4 + [FF] * 2 + [AA] * 2 + [PP] * 2 + [AA] * 10)
    assert stage.frame_pose(centre + DELAY - period / 2, period).dominant == PP


def test_without_closures_every_frame_shows_the_pose_at_its_centre():
    rng = np.random.default_rng(24)
    open_visemes = [v for v in VISEME_INDEX.values() if v not in (PP, FF)]
    visemes = [int(v) for v in rng.choice(open_visemes, MicLipSync.RING - 12)]
    stage = stage_for(visemes)
    for fps in FPS:
        for phase in phases(5):
            for centre, pose in frames(stage, fps, phase, START + 5.0):
                assert pose == stage.pose_at_monotonic(centre), (fps, phase, centre)
    # Before the first hop, and past the newest: rest, and the newest pose.
    period = 1 / 30
    assert stage.frame_pose(START - 1.0, period) == stage.pose_at_monotonic(START - 1.0)
    assert stage.frame_pose(START + 60.0, period) == shown(visemes[-1])


def test_a_closure_while_muted_is_never_shown():
    visemes = [AA] * 20 + [PP] * 2 + [AA] * 20
    stage = stage_for(visemes, muted_hops=range(15, 25))
    for fps in (24, 30, 60):
        for phase in phases(7):
            assert showing(frames(stage, fps, phase, START + 0.42), PP) == []


def test_a_period_that_is_not_positive_is_refused():
    stage = stage_for([AA] * 5)
    with pytest.raises(ValueError, match="period"):
        stage.frame_pose(START, 0.0)
