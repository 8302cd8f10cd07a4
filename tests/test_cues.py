"""Rhubarb-shaped cue documents and multi-sentence renders from the real voice."""

import json

import numpy as np
import pytest

from pipeline.core.frames import VisemeCue
from pipeline.core.modes import OFFLINE_MODE
from pipeline.core.visemes import OVR_VISEMES, RHUBARB_SHAPE
from pipeline.lipsync.cue_formats import cues_document
from pipeline.voice.cues import concat_tracks
from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS
from pipeline.voice.viseme_track import VisemeTrack


@pytest.fixture(scope="module")
def segments():
    # Rendered as the app renders files: in the offline mode, a segment per sentence.
    tts = StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)
    return list(tts.synthesize("Bob made five pies. Hello, world! Its kids sit.",
                               LATENCY_MODES[OFFLINE_MODE]))


def _assert_covers(doc, duration):
    cues = doc["mouthCues"]
    assert cues[0]["start"] == 0.0
    assert abs(cues[-1]["end"] - duration) <= 0.001
    for a, b in zip(cues, cues[1:]):
        assert a["end"] == b["start"] and a["value"] != b["value"]
    for cue in cues:
        assert cue["end"] > cue["start"]
        assert round(cue["start"], 3) == cue["start"] and round(cue["end"], 3) == cue["end"]


def test_ovr_document_of_a_real_sentence(segments):
    segment = segments[0]
    track = VisemeTrack(segment.phonemes)
    doc = cues_document(track.cues(), "bob.wav", segment.duration)
    assert doc["metadata"] == {
        "soundFile": "bob.wav", "duration": round(segment.duration, 3), "visemeSet": "ovr15",
    }
    _assert_covers(doc, segment.duration)
    assert [c["value"] for c in doc["mouthCues"]] == [c.value for c in track.cues()]
    assert json.loads(json.dumps(doc)) == doc


def test_rhubarb_document_maps_shapes_and_merges_neighbours(segments):
    audio, cues = concat_tracks(segments)
    duration = len(audio) / segments[0].sample_rate
    doc = cues_document(cues, "all.wav", duration, fmt="rhubarb")
    assert doc["metadata"]["visemeSet"] == "rhubarb"
    _assert_covers(doc, duration)
    assert {c["value"] for c in doc["mouthCues"]} <= set(RHUBARB_SHAPE.values())
    # Several OVR visemes share a Rhubarb shape, so merging leaves fewer cues.
    assert len(doc["mouthCues"]) < len(cues)
    assert doc["mouthCues"][0]["value"] == "X"


def test_gaps_and_a_short_tail_become_silence():
    cues = [VisemeCue(0.1004, 0.2, "aa"), VisemeCue(0.3, 0.35, "PP")]
    doc = cues_document(cues, "x.wav", 0.5)
    assert [(c["start"], c["end"], c["value"]) for c in doc["mouthCues"]] == [
        (0.0, 0.1, "sil"), (0.1, 0.2, "aa"), (0.2, 0.3, "sil"), (0.3, 0.35, "PP"), (0.35, 0.5, "sil"),
    ]


def test_sub_millisecond_cues_vanish_without_leaving_gaps():
    cues = [VisemeCue(0.0, 0.1002, "aa"), VisemeCue(0.1002, 0.1004, "PP"), VisemeCue(0.1004, 0.2, "E")]
    doc = cues_document(cues, "x.wav", 0.2)
    assert [c["value"] for c in doc["mouthCues"]] == ["aa", "E"]
    _assert_covers(doc, 0.2)


def test_unknown_format_is_refused():
    with pytest.raises(ValueError, match="unknown cue format"):
        cues_document([], "x.wav", 1.0, fmt="papagayo")


def test_concat_is_sample_exact(segments):
    audio, cues = concat_tracks(segments)
    rate = segments[0].sample_rate
    assert audio.dtype == np.float32
    assert len(audio) == sum(len(s.audio) for s in segments)
    np.testing.assert_array_equal(audio[: len(segments[0].audio)], segments[0].audio)
    assert cues[0].start == 0.0
    assert cues[-1].end == pytest.approx(len(audio) / rate, abs=1e-9)
    for a, b in zip(cues, cues[1:]):
        assert a.end == pytest.approx(b.start, abs=1e-9) and a.value != b.value
    assert {c.value for c in cues} <= set(OVR_VISEMES)
    # The second sentence's first sound starts where its own track says, offset.
    second = VisemeTrack(segments[1].phonemes).cues()[1]
    offset = len(segments[0].audio) / rate
    assert any(c.value == second.value and c.start == pytest.approx(offset + second.start, abs=1e-9)
               for c in cues)


def test_concat_of_nothing_is_empty():
    audio, cues = concat_tracks([])
    assert len(audio) == 0 and cues == []


def test_concat_refuses_mixed_sample_rates(segments):
    other = type(segments[0])("x", segments[0].audio, 16000, segments[0].phonemes)
    with pytest.raises(ValueError, match="sample rate"):
        concat_tracks([segments[0], other])
