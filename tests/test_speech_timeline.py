"""Viseme tracks on the media clock: scheduling, Stop, and a lock-free reader."""

import threading

import numpy as np
import pytest

from pipeline.core.frames import PhonemeTiming
from pipeline.core.modes import PREMIUM
from pipeline.core.visemes import OVR_VISEMES, VISEME_INDEX
from pipeline.voice.speech_timeline import CUT_BLEND, SpeechTimeline
from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS
from pipeline.voice.viseme_track import VisemeTrack

SIL = VISEME_INDEX["sil"]
PERIOD = 1 / 60


@pytest.fixture(scope="module")
def tracks():
    # Premium mode: one track per sentence.
    tts = StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)
    return [VisemeTrack(s.phonemes)
            for s in tts.synthesize("Bob made five pies. Hello world.", LATENCY_MODES[PREMIUM])]


def _same(a, b):
    # Media-clock times are offsets, so local times differ from the track's by rounding.
    return (a.viseme_a, a.viseme_b, a.dominant) == (b.viseme_a, b.viseme_b, b.dominant) and \
        a.mix == pytest.approx(b.mix, abs=1e-6) and a.openness == pytest.approx(b.openness, abs=1e-6)


def test_an_empty_timeline_rests():
    timeline = SpeechTimeline()
    assert timeline.end_time == 0.0
    assert timeline.frame_pose(12.0, PERIOD).dominant == SIL


def test_a_scheduled_track_plays_on_the_media_clock(tracks):
    track = tracks[0]
    timeline = SpeechTimeline()
    timeline.schedule(track, 10.0)
    assert timeline.end_time == 10.0 + track.duration
    for t in np.arange(0.0, track.duration, PERIOD):
        assert _same(timeline.frame_pose(10.0 + t, PERIOD), track.frame_pose(t, PERIOD))
    assert timeline.frame_pose(9.5, PERIOD).dominant == SIL
    assert timeline.frame_pose(10.0 + track.duration + 0.1, PERIOD).dominant == SIL
    shown = {OVR_VISEMES[timeline.frame_pose(10.0 + t, PERIOD).dominant]
             for t in np.arange(0.0, track.duration, PERIOD)}
    assert {"PP", "FF", "aa"} <= shown


def test_sentences_play_back_to_back(tracks):
    timeline = SpeechTimeline()
    timeline.schedule(tracks[0], 1.0)
    timeline.schedule(tracks[1], timeline.end_time)
    second_start = 1.0 + tracks[0].duration
    assert timeline.end_time == pytest.approx(second_start + tracks[1].duration)
    for t in np.arange(0.0, tracks[1].duration, PERIOD):
        assert _same(timeline.frame_pose(second_start + t, PERIOD), tracks[1].frame_pose(t, PERIOD))


def test_cut_closes_the_mouth_quickly_and_smoothly(tracks):
    track = tracks[0]
    timeline = SpeechTimeline()
    timeline.schedule(track, 0.0)
    # Cut in the middle of an open vowel, so there is something to close.
    vowel = next(c for c in track.cues() if c.value == "aa")
    cut = (vowel.start + vowel.end) / 2
    timeline.cut(cut)
    assert timeline.end_time == pytest.approx(cut + CUT_BLEND)

    openness = [timeline.frame_pose(cut + dt - 0.0005, 0.001).openness
                for dt in np.arange(0.0, CUT_BLEND + 0.01, 0.001)]
    assert openness[0] == pytest.approx(track.pose_at(cut).openness, abs=0.01)
    assert all(a >= b for a, b in zip(openness, openness[1:]))
    assert max(abs(a - b) for a, b in zip(openness, openness[1:])) < 0.1
    assert openness[-1] == 0.0
    for t in np.arange(cut + CUT_BLEND, track.duration, PERIOD):
        assert timeline.frame_pose(t, PERIOD).dominant == SIL
    # Before the cut nothing changed.
    assert _same(timeline.frame_pose(cut - 0.1, PERIOD), track.frame_pose(cut - 0.1, PERIOD))


def test_a_closure_after_the_cut_is_not_shown(tracks):
    track = tracks[0]
    closure = next(c for c in track.cues() if c.value == "PP")
    timeline = SpeechTimeline()
    timeline.schedule(track, 0.0)
    timeline.cut(closure.start - 0.001)
    frame_start = closure.start - 0.004
    assert track.frame_pose(frame_start, 1 / 30).dominant == VISEME_INDEX["PP"]
    assert timeline.frame_pose(frame_start, 1 / 30).dominant != VISEME_INDEX["PP"]


def test_speech_scheduled_after_a_cut_plays(tracks):
    timeline = SpeechTimeline()
    timeline.schedule(tracks[0], 0.0)
    timeline.cut(0.2)
    timeline.schedule(tracks[1], 0.5)
    assert timeline.end_time == pytest.approx(0.5 + tracks[1].duration)
    for t in np.arange(0.0, tracks[1].duration, PERIOD):
        assert _same(timeline.frame_pose(0.5 + t, PERIOD), tracks[1].frame_pose(t, PERIOD))


def test_clear_forgets_everything(tracks):
    timeline = SpeechTimeline()
    timeline.schedule(tracks[0], 0.0)
    timeline.clear()
    assert timeline.end_time == 0.0
    assert all(timeline.frame_pose(t, PERIOD).dominant == SIL
               for t in np.arange(0.0, tracks[0].duration, PERIOD))


def test_old_entries_are_pruned_recent_ones_kept(tracks):
    timeline = SpeechTimeline()
    timeline.schedule(tracks[0], 0.0)
    speaking = next(t for t in np.arange(0.0, 1.0, PERIOD)
                    if timeline.frame_pose(t, PERIOD).dominant != SIL)
    timeline.schedule(tracks[1], 5.0)
    assert timeline.frame_pose(speaking, PERIOD).dominant != SIL
    timeline.schedule(tracks[1], 100.0)
    assert timeline.frame_pose(speaking, PERIOD).dominant == SIL


def test_reader_never_blocks_or_breaks_while_the_writer_rewrites(tracks):
    timeline = SpeechTimeline()
    stop = threading.Event()
    errors = []

    def writer():
        t = 0.0
        while not stop.is_set():
            timeline.schedule(tracks[0], t)
            timeline.cut(t + 0.1)
            timeline.schedule(tracks[1], t + 0.2)
            if t > 5:
                timeline.clear()
                t = 0.0
            t += 0.05

    thread = threading.Thread(target=writer)
    thread.start()
    frames = 0
    try:
        for i in range(20_000):
            pose = timeline.frame_pose((i % 400) * 0.015, PERIOD)
            if not (0 <= pose.dominant < len(OVR_VISEMES) and 0.0 <= pose.mix <= 1.0
                    and 0.0 <= pose.openness <= 1.0):
                errors.append(pose)
            frames += 1
    finally:
        stop.set()
        thread.join()
    assert errors == [] and frames == 20_000


def test_onsets_are_in_media_time_and_stop_at_a_cut():
    track = VisemeTrack([
        PhonemeTiming("m", "PP", 0.0, 0.1), PhonemeTiming("a", "aa", 0.1, 0.3),
        PhonemeTiming("m", "PP", 0.3, 0.4),
    ])
    timeline = SpeechTimeline()
    timeline.schedule(track, 5.0)
    times, visemes = timeline.onsets()
    assert list(times) == pytest.approx([5.0, 5.1, 5.3])
    assert [OVR_VISEMES[v] for v in visemes] == ["PP", "aa", "PP"]
    timeline.cut(5.2)
    times, _ = timeline.onsets()
    assert list(times) == pytest.approx([5.0, 5.1])


def test_version_changes_on_every_write():
    timeline = SpeechTimeline()
    track = VisemeTrack([PhonemeTiming("a", "aa", 0.0, 0.1)])
    seen = [timeline.version()]
    timeline.schedule(track, 1.0)
    seen.append(timeline.version())
    timeline.cut(1.05)
    seen.append(timeline.version())
    timeline.clear()
    seen.append(timeline.version())
    assert len(set(seen)) == 4


def test_cues_of_what_was_scheduled_start_at_the_first_entry_and_stop_at_a_cut():
    timeline = SpeechTimeline()
    track = VisemeTrack([PhonemeTiming("m", "PP", 0.0, 0.1), PhonemeTiming("a", "aa", 0.1, 0.3)])
    timeline.schedule(track, 2.0)
    timeline.schedule(track, 2.3)
    timeline.cut(2.45)
    cues = timeline.cues()
    assert [(round(c.start, 3), round(c.end, 3), c.value) for c in cues] == [
        (0.0, 0.1, "PP"), (0.1, 0.3, "aa"), (0.3, 0.4, "PP"), (0.4, 0.45, "aa")]
