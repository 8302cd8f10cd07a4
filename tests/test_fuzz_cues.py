"""Property tests of every cue and captions file we write, each read back by its format's
own reader: json, csv (Rhubarb's TSV), xml.etree (Rhubarb's XML), Moho's switch data by
its spec's lines, Live2D's motion3 by its spec's segments, the VRM animation by
pygltflib and glTF's binary layout, and WebVTT / SRT by FFmpeg's demuxers (PyAV), the
readers of the players that show them. For any cues (unsorted, overlapping, past the
end, shorter than a frame), any sound file name and any frame rate, a file reads back
as what was written: contiguous cues from 0 to the sound's end, each where one was
given, silence where none was."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import xml.etree.ElementTree as ET

import av
import numpy as np
import pygltflib
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pipeline.core.frames import VisemeCue
from pipeline.core.visemes import OVR_VISEMES, RHUBARB_SHAPE
from pipeline.lipsync.cue_formats import (
    FORMATS,
    MAX_FPS,
    CueFormatError,
    check_fps,
    cue_file,
)
from pipeline.voice.captions import CaptionWord, caption_blocks, caption_document
from tests.fuzzing import ANY_CHAR, EDGE_STRINGS, examples
from tests.harness.cue_readers import (
    RHUBARB_SHAPES,
    glb_chunks,
    moho_switches,
    motion3_points,
    vrma_weights,
)

durations = st.floats(0.0, 20.0, allow_nan=False)


@st.composite
def cue_lists(draw):
    """(cues, duration): cues anywhere around the sound, in any order."""
    duration = draw(durations)
    times = st.floats(-1.0, duration + 1.0, allow_nan=False)
    cues = []
    for start, length, value in draw(st.lists(st.tuples(times, st.floats(0, 2), st.sampled_from(OVR_VISEMES)),
                                                max_size=40)):
        cues.append(VisemeCue(start, start + length, value))
    return cues, duration


sound_files = st.one_of(st.text(ANY_CHAR, max_size=20), st.sampled_from(EDGE_STRINGS))


def _covering(cues, t: float, slack: float) -> set[str]:
    """The values of the cues over `t`, each widened by `slack` (rounding) either way."""
    return {c.value for c in cues if c.start - slack <= t < c.end + slack}


def _check_cover(spans, cues, duration, ticks, rename=lambda v: v):
    """Spans (start, end, value) read from a file: contiguous from 0 to the sound's end;
    at the middle of each, a value some given cue has there (or silence where none); none
    for a sound shorter than half a tick (found by bench/fuzz.py: 0.5 ms at 1 ms ticks)."""
    if round(duration * ticks) == 0:
        assert spans == []
        return
    assert spans[0][0] == 0 and math.isclose(spans[-1][1], round(duration * ticks) / ticks, abs_tol=1e-9)
    assert all(a[1] == b[0] and a[2] != b[2] for a, b in zip(spans, spans[1:]))
    slack = 1 / ticks
    for start, end, value in spans:
        assert start < end
        mid = (start + end) / 2
        given_there = {rename(v) for v in _covering(cues, mid, slack)}
        silence = rename("sil")
        assert value in given_there or (value == silence and
                                        not _covering(cues, mid, -slack) - {"sil"}), (mid, value)


def _check_name(read: str, given: str) -> None:
    """The sound file's name reads back as given, but for what is not text (a control
    character, a byte of the name that is not UTF-8: a lone surrogate), shown as U+FFFD."""
    assert len(read) == len(given)
    assert all(r == g or r == "\ufffd" for r, g in zip(read, given))
    assert not re.search("[\x00-\x08\x0b-\x1f\ud800-\udfff]", read)


@examples(120)
@given(cue_lists(), sound_files, st.sampled_from(["ovr", "rhubarb"]))
# Found by bench/fuzz.py: 0.5 ms rounds to no millisecond (round half to even).
@example(([], 0.0005), "", "ovr")
def test_json_reads_back_as_the_cues_given(cues_and_duration, sound_file, name):
    cues, duration = cues_and_duration
    document = json.loads(cue_file(FORMATS[name], cues, duration, sound_file))
    spans = [(c["start"], c["end"], c["value"]) for c in document["mouthCues"]]
    rename = (lambda v: RHUBARB_SHAPE[v]) if name == "rhubarb" else (lambda v: v)
    _check_cover(spans, cues, duration, 1000, rename)
    _check_name(document["metadata"]["soundFile"], sound_file)


@examples(200)
@given(cue_lists(), sound_files)
# Found: the XML writer raised UnicodeEncodeError on a name's byte that is not UTF-8, and
# wrote a control character no XML reader takes.
@example(([], 0.0), "\ud800")
@example(([], 0.0), "\x1f")
# Found by bench/fuzz.py: a carriage return read back as a line feed.
@example(([], 0.0), "\r")
def test_rhubarb_tsv_and_xml_read_back_alike(cues_and_duration, sound_file):
    cues, duration = cues_and_duration
    xml = cue_file(FORMATS["xml"], cues, duration, sound_file)
    root = ET.fromstring(xml)
    _check_name(root.findtext("metadata/soundFile", ""), sound_file)
    spans = [(float(c.get("start")), float(c.get("end")), c.text) for c in root.iter("mouthCue")]
    rows = list(csv.reader(io.StringIO(cue_file(FORMATS["tsv"], cues, duration).decode()),
                           delimiter="\t"))
    end = round(duration * 100) / 100
    assert [(float(t), s) for t, s in rows] == [(a, v) for a, _, v in spans] + [(end, "X")]
    if spans:
        _check_cover(spans, cues, duration, 100, lambda v: RHUBARB_SHAPE[v])
    assert {v for *_, v in spans} <= RHUBARB_SHAPES


fps_values = st.one_of(st.sampled_from([24.0, 25.0, 30.0, 60.0]), st.floats(0.5, MAX_FPS))


@examples(60)
@given(cue_lists(), fps_values)
# Found: a cue rounding to nothing after a gap made two overlapping silences.
@example(([VisemeCue(1.0, 1.0, "sil")], 1.0), 24.0)
def test_moho_switches_count_every_frame(cues_and_duration, fps):
    cues, duration = cues_and_duration
    pairs = moho_switches(cue_file(FORMATS["dat"], cues, duration, fps=fps).decode())
    frames = max(1, math.ceil(duration * fps - 1e-9))
    assert pairs[-1][1] == "X" and pairs[-1][0] <= frames + 1
    assert all(a[1] != b[1] for a, b in zip(pairs, pairs[1:]))


@examples(50)
@given(cue_lists(), fps_values)
# Found: a sound ending within a key's resolution of its last frame's start (here a
# 1-sample sound) gave two keys at one time.
@example(([], 1 / 48000), 24.0)
@example(([], 2.2250738585e-313), 24.0)
@example(([], 6.103515625e-05), 24.0)
def test_live2d_motion_counts_and_curves_hold(cues_and_duration, fps):
    cues, duration = cues_and_duration
    motion = json.loads(cue_file(FORMATS["motion3"], cues, duration, fps=fps))
    meta = motion["Meta"]
    walked = [motion3_points(c["Segments"]) for c in motion["Curves"]]
    assert meta["CurveCount"] == len(walked) == 2
    assert meta["TotalSegmentCount"] == sum(n for _, n in walked)
    assert meta["TotalPointCount"] == sum(len(p) for p, _ in walked)
    for (points, _), low in zip(walked, (0.0, -1.0)):
        times = [t for t, _ in points]
        assert times[0] == 0.0 and all(a < b for a, b in zip(times, times[1:]))
        # The last key is the sound's end, or the last frame's start within a key's
        # resolution (1e-4 s) of it, Duration itself rounded to one (half a key either way).
        assert 0 <= meta["Duration"] - times[-1] < 1.5e-4 or times[-1] == meta["Duration"]
        assert all(low <= v <= 1.0 for _, v in points)


@examples(60)
@given(cue_lists(), fps_values)
@example(([], 2.225073858507203e-309), 24.0)
def test_vrm_animation_reads_back_with_pygltflib(cues_and_duration, fps):
    cues, duration = cues_and_duration
    data = cue_file(FORMATS["vrma"], cues, duration, fps=fps)
    gltf = pygltflib.GLTF2.load_from_bytes(data)
    assert gltf.asset.version == "2.0" and len(gltf.animations[0].channels) == len(gltf.nodes)
    for times, weights in vrma_weights(*glb_chunks(data)).values():
        assert np.all((weights >= 0) & (weights <= 1))


@examples(100)
@given(st.floats(allow_nan=True, allow_infinity=True))
# Found: any frame rate above 0 was taken, and 1e9 never finished writing.
@example(1e9)
def test_a_frame_rate_is_taken_or_refused_in_one_line(fps):
    try:
        check_fps(fps)
    except CueFormatError as refused:
        assert "\n" not in str(refused)
        return
    assert 0 < fps <= MAX_FPS


# -- captions ----------------------------------------------------------------------------

# What a typed word may be (typed text split at white space): any characters, and those
# that mean something to the formats themselves.
WORDS = st.one_of(
    st.text(ANY_CHAR.filter(lambda c: not c.isspace() and c not in "\x00"), min_size=1, max_size=8),
    st.sampled_from(["-->", "1", "00:00:01.000", "00:00:01,000", "<b>", "&amp;", "&", "<", ">",
                     "WEBVTT", "NOTE", "<00:00:00.500>", "{\\an8}", "</c>"]))


@st.composite
def caption_words(draw):
    """(words, duration): words in order, laid out in blocks and lines as CaptionTrack
    lays them out, the sound lasting at least to the last one's end."""
    words, t, block, line = [], 0.0, 0, 0
    for text, gap, length, move in draw(st.lists(
            st.tuples(WORDS, st.floats(0, 3), st.floats(0, 2), st.sampled_from(["", "", "line", "block"])),
            min_size=1, max_size=30)):
        if move == "block" and words:
            block, line = block + 1, 0
        elif move == "line" and words:
            line = min(line + 1, 1)
        start = t + gap
        words.append(CaptionWord(text, start, start + length, block, line))
        t = start + length
    return words, t + draw(st.floats(0, 5))


def _demux(text: str, fmt: str) -> list[tuple[int, int, str]]:
    """(start ms, end ms, text) of each cue, as FFmpeg reads the file."""
    with av.open(io.BytesIO(text.encode("utf-8")), format={"vtt": "webvtt", "srt": "srt"}[fmt]) as c:
        return [(p.pts, p.pts + p.duration, bytes(p).decode("utf-8"))
                for p in c.demux(c.streams[0]) if p.pts is not None]


def _utf8_safe(words):
    # A name is written as UTF-8: a typed word cannot hold a lone surrogate (the text
    # comes from Qt, the API's JSON or a UTF-8 file, each refusing or replacing those).
    return all(not any(0xD800 <= ord(c) <= 0xDFFF for c in w.text) for w in words)


def _as_read(blocks) -> list[tuple[int, int, list[str]]]:
    """(start ms, end ms, lines) of the cues FFmpeg reads for `blocks`: one a block, but
    for a cue the same as the one before it in times and text, which its subtitle
    demuxers drop as a duplicate (libavformat/subtitles.c, drop_dups). Blocks follow one
    another, so only two of no length at the same time are the same, and a cue of no
    length has no timestamps inside it to tell them apart."""
    out: list[tuple[int, int, list[str]]] = []
    for start, end, block in blocks:
        lines = [" ".join(w.text for w in block if w.line == n)
                 for n in sorted({w.line for w in block})]
        cue = (round(start * 1000), round(end * 1000), lines)
        if not out or out[-1] != cue:
            out.append(cue)
    return out


@examples(150)
@given(caption_words(), st.sampled_from(["vtt", "srt"]))
# Found by bench/fuzz.py (issue 26): two blocks of no length at 0 s with the same word,
# read back by FFmpeg as one cue.
@example(([CaptionWord("0", 0.0, 0.0, 0, 0), CaptionWord("0", 0.0, 0.0, 1, 0)], 0.0), "vtt")
# Found by bench/fuzz.py: SRT words making a line FFmpeg reads as the next cue's timing.
@example(([CaptionWord("0", 0.0, 0.0, 0, 0), CaptionWord("00:00:01.000", 0.0, 0.0, 0, 1),
           CaptionWord("-->", 0.0, 0.0, 0, 1), CaptionWord("00:00:01.000", 0.0, 0.0, 0, 1)],
          0.0), "srt")
def test_captions_read_back_by_ffmpeg_as_their_blocks(words_and_duration, fmt):
    words, duration = words_and_duration
    if not _utf8_safe(words):
        return
    text = caption_document(words, fmt, duration)
    expected = _as_read(caption_blocks(words, duration))
    read = _demux(text, fmt)
    assert [(a, b) for a, b, _ in read] == [(a, b) for a, b, _ in expected]
    for (_, _, cue), (_, _, lines) in zip(read, expected):
        if fmt == "vtt":
            cue = re.sub(r"<\d\d:\d\d:\d\d\.\d\d\d>", "", cue)
            cue = cue.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        else:  # an arrow is written with a word joiner inside it (captions.srt)
            cue = cue.replace("-\u2060->", "-->")
        assert cue.split("\n") == lines


@pytest.mark.parametrize("fmt", ["vtt", "srt"])
def test_a_caption_block_ends_where_the_sound_does(fmt):
    words = [CaptionWord("hi", 0.0, 0.5, 0, 0)]
    assert _demux(caption_document(words, fmt, 0.8), fmt) == [(0, 800, "hi")]
