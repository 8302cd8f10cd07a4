"""The cue files animators load, from the real voice, each read back by its format's own
reader where Python has one (csv, xml.etree, json, pygltflib), else by the spec's rules."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
import wave
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from pipeline.core.frames import MouthPose, VisemeCue
from pipeline.core.modes import OFFLINE_MODE
from pipeline.core.mouth_shapes import VRM1_VOWELS, mouth_shape
from pipeline.core.visemes import OPENNESS, RHUBARB_SHAPE, VISEME_INDEX
from pipeline.lipsync.cue_formats import (
    DEFAULT_FPS,
    FORMATS,
    CueFormatError,
    cue_file,
    cue_format,
)
from pipeline.voice.cues import concat_tracks
from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS
from pipeline.voice.viseme_track import MAX_BLEND_HALF_WIDTH
from tests.harness.cue_readers import (
    RHUBARB_SHAPES,
    glb_chunks,
    moho_switches,
    motion3_points,
    vrma_weights,
)

REPO = Path(__file__).resolve().parent.parent
TEXT = "Bob made five pies. Hello, world! Its kids sit."
# 10 ms windows of this voice (noise off) measured: inside its pauses RMS ≤ 0.0008, inside
# vowels ≥ 0.1 (0.10-0.23), stop closures 0.0006-0.004 but never longer than 70 ms. A
# word's last stop ("world", "sit") closes in silence: a pause begins with its closure,
# the tongue up and the lips apart, so a pause counts as closed lips from STOP_S in.
QUIET_RMS, LOUD_RMS, PAUSE_S, STOP_S = 0.001, 0.1, 0.1, 0.07


@pytest.fixture(scope="module")
def speech():
    """(audio, sample rate, cues, duration) of three sentences, as `say --wav` makes them."""
    tts = StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)
    segments = list(tts.synthesize(TEXT, LATENCY_MODES[OFFLINE_MODE]))
    audio, cues = concat_tracks(segments)
    rate = segments[0].sample_rate
    return audio, rate, cues, len(audio) / rate


def _window_rms(audio, rate):
    hop = rate // 100
    frames = audio[: len(audio) // hop * hop].reshape(-1, hop)
    return np.sqrt(np.mean(frames.astype(np.float64) ** 2, axis=1)), hop / rate


def _pauses(audio, rate, margin):
    """Times inside the voice's pauses (≥ PAUSE_S of windows under QUIET_RMS), `margin`
    in from each end and past a closing stop: where nothing is said, whatever the cues
    say."""
    rms, step = _window_rms(audio, rate)
    times, run = [], []
    for i, quiet in enumerate(np.append(rms < QUIET_RMS, False)):
        if quiet:
            run.append(i)
            continue
        if len(run) * step >= PAUSE_S:
            start, end = run[0] * step + STOP_S + margin, (run[-1] + 1) * step - margin
            times += list(np.arange(start, end, step / 2))
        run = []
    return times


def _loud(audio, rate):
    """Centres of windows loud (≥ LOUD_RMS) for 50 ms either side: a vowel being said."""
    rms, step = _window_rms(audio, rate)
    reach = round(0.05 / step)
    return [(i + 0.5) * step for i in range(reach, len(rms) - reach)
            if np.all(rms[i - reach:i + reach + 1] >= LOUD_RMS)]


def _text(fmt, speech, fps=DEFAULT_FPS, sound_file="speech & more.wav"):
    _, _, cues, duration = speech
    return cue_file(FORMATS[fmt], cues, duration, sound_file, fps).decode("utf-8")


def _shape_at(spans, t):
    return next(v for a, b, v in spans if a <= t < b)


# --- choosing a format -------------------------------------------------------------------

@pytest.mark.parametrize("name, fmt", [
    ("cues.json", "ovr"), ("CUES.JSON", "ovr"), ("cues.tsv", "tsv"), ("cues.xml", "xml"),
    ("mouth.dat", "dat"), ("mouth.motion3.json", "motion3"), ("Mouth.Motion3.JSON", "motion3"),
    ("talk.vrma", "vrma"), ("words.vtt", "vtt"), ("words.srt", "srt"),
])
def test_the_suffix_picks_the_format(name, fmt):
    assert cue_format(Path(name)).name == fmt


@pytest.mark.parametrize("name, fmt", [
    ("cues.json", "rhubarb"), ("cues.json", "ovr"), ("cues.txt", "tsv"), ("mouth", "dat"),
])
def test_a_format_named_with_a_suffix_of_its_own_or_none_is_written(name, fmt):
    assert cue_format(Path(name), fmt).name == fmt


@pytest.mark.parametrize("name, fmt, says", [
    ("cues.xml", "tsv", "cues.xml: .xml is for Rhubarb's XML"),
    ("cues.json", "motion3", "name it NAME.motion3.json"),
    ("mouth.motion3.json", "ovr", ".motion3.json is for a Live2D motion"),
    ("talk.vrma", "vtt", "not --format vtt: name it NAME.vtt"),
])
def test_a_format_its_suffix_contradicts_is_refused_in_one_line(name, fmt, says):
    with pytest.raises(CueFormatError) as refused:
        cue_format(Path(name), fmt)
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_a_suffix_that_names_no_format_is_refused_with_the_ones_that_do():
    with pytest.raises(CueFormatError, match=r"cues\.txt: cannot tell .* \.motion3\.json, \.vrma"):
        cue_format(Path("cues.txt"))


# --- Rhubarb's TSV and XML ---------------------------------------------------------------

def test_tsv_and_xml_read_back_agree_and_cover_the_sound(speech):
    _, _, _, duration = speech
    rows = list(csv.reader(io.StringIO(_text("tsv", speech)), delimiter="\t"))
    root = ET.fromstring(_text("xml", speech).encode("utf-8"))
    assert root.tag == "rhubarbResult"
    assert root.findtext("metadata/soundFile") == "speech & more.wav"
    assert float(root.findtext("metadata/duration")) == pytest.approx(duration, abs=0.005)
    cues = [(float(c.get("start")), float(c.get("end")), c.text) for c in root.iter("mouthCue")]
    assert cues[0][0] == 0.0 and cues[-1][1] == pytest.approx(duration, abs=0.005)
    for (_, end, shape), (start, _, following) in zip(cues, cues[1:]):
        assert end == start and shape != following  # contiguous, equal neighbours merged
    assert {shape for *_, shape in cues} <= RHUBARB_SHAPES
    # TSV: each cue's start and shape, then the end with the mouth closed (Rhubarb's layout).
    assert [(float(t), s) for t, s in rows] == [(a, v) for a, _, v in cues] + [(cues[-1][1], "X")]
    assert all(len(t.split(".")[1]) == 2 for t, _ in rows)  # centiseconds, as Rhubarb writes


def test_rhubarb_cues_close_the_mouth_in_pauses_and_open_it_on_vowels(speech):
    audio, rate, _, _ = speech
    root = ET.fromstring(_text("xml", speech))
    spans = [(float(c.get("start")), float(c.get("end")), c.text) for c in root.iter("mouthCue")]
    # The cues' edges are rounded to the centisecond: keep that far in.
    pauses, loud = _pauses(audio, rate, 0.01), _loud(audio, rate)
    assert len(pauses) > 30 and len(loud) > 10
    assert {_shape_at(spans, t) for t in pauses} == {"X"}
    assert "X" not in {_shape_at(spans, t) for t in loud}


# --- Moho / Papagayo switch data ---------------------------------------------------------


def _frame_shapes(pairs, frames):
    """The shape Moho shows on each frame 1 .. `frames` (a switch holds until the next)."""
    shown = []
    for (frame, shape), (following, _) in zip(pairs, [*pairs[1:], (frames + 1, None)]):
        shown += [shape] * (following - frame)
    return shown


@pytest.mark.parametrize("fps", [24.0, 30.0, 60.0])
def test_dat_shows_each_whole_frame_of_a_cue_as_that_cue_at_the_frame_rate(speech, fps):
    _, _, cues, duration = speech
    pairs = moho_switches(_text("dat", speech, fps))
    frames = math.ceil(duration * fps)  # as many as the video has
    assert pairs[-1][1] == "X" and pairs[-1][0] <= frames + 1  # the mouth closed at the end
    assert all(a[1] != b[1] for a, b in zip(pairs, pairs[1:]))  # a switch per change
    shown = _frame_shapes(pairs, frames)
    # A frame lying wholly inside a cue, clear of the blends either side, shows that cue.
    reach = MAX_BLEND_HALF_WIDTH
    checked = 0
    for i, shape in enumerate(shown):
        start, end = i / fps, (i + 1) / fps
        cue = next((c for c in cues if c.start + reach <= start and end <= c.end - reach), None)
        if cue is not None:
            assert shape == RHUBARB_SHAPE[cue.value], (i, cue)
            checked += 1
    # Measured: 25 such frames at 24 fps, more at the higher rates; none would be vacuous.
    assert checked >= 25


def test_dat_shows_a_closure_shorter_than_a_frame():
    # A 10 ms "p" between vowels: at 24 fps (42 ms frames) no frame is mostly "p", and
    # frame_pose still gives it the frame nearest its start (MUST_SHOW).
    cues = [VisemeCue(0.0, 0.2, "aa"), VisemeCue(0.2, 0.21, "PP"), VisemeCue(0.21, 0.5, "aa")]
    shapes = [s for _, s in moho_switches(cue_file(FORMATS["dat"], cues, 0.5).decode())]
    assert shapes == ["D", "A", "D", "X"]


# --- Live2D motion3.json -----------------------------------------------------------------


def test_motion3_counts_are_exact_and_the_mouth_follows_the_speech(speech):
    audio, rate, cues, duration = speech
    motion = json.loads(_text("motion3", speech, 30.0))
    assert motion["Version"] == 3 and set(motion) == {"Version", "Meta", "Curves"}
    meta = motion["Meta"]
    assert meta["Fps"] == 30.0 and meta["Loop"] is False
    assert meta["Duration"] == pytest.approx(duration, abs=1e-4)
    curves = {c["Id"]: c for c in motion["Curves"]}
    assert set(curves) == {"ParamMouthOpenY", "ParamMouthForm"}
    assert all(c["Target"] == "Parameter" and set(c) == {"Target", "Id", "Segments"}
               for c in motion["Curves"])
    walked = {name: motion3_points(c["Segments"]) for name, c in curves.items()}
    assert meta["CurveCount"] == len(curves)
    assert meta["TotalSegmentCount"] == sum(n for _, n in walked.values())
    assert meta["TotalPointCount"] == sum(len(p) for p, _ in walked.values())
    assert meta["UserDataCount"] == 0 and meta["TotalUserDataSize"] == 0

    def curve(name):
        times, values = map(np.array, zip(*walked[name][0]))
        assert times[0] == 0.0 and np.all(np.diff(times) > 0) and times[-1] == meta["Duration"]
        return lambda t: float(np.interp(t, times, values))

    opening, form = curve("ParamMouthOpenY"), curve("ParamMouthForm")
    margin = MAX_BLEND_HALF_WIDTH + 1 / 30  # a blend, then a frame's hold
    assert max(opening(t) for t in _pauses(audio, rate, margin)) == 0.0
    assert min(opening(t) for t in _loud(audio, rate)) > 0.0
    # Clear of the blends a cue is itself: its open and form as pipeline.core.mouth_shapes
    # gives them (the file keeps 4 decimals).
    long = [c for c in cues if c.end - c.start >= 2 * margin + 1 / 30]
    assert len(long) >= 8
    for c in long:
        index = VISEME_INDEX[c.value]
        shape = mouth_shape(MouthPose(index, index, 1.0, OPENNESS[c.value]))
        mid = (c.start + c.end) / 2
        assert opening(mid) == pytest.approx(shape.open, abs=1e-4), c
        assert form(mid) == pytest.approx(shape.form, abs=1e-4), c


# --- VRM Animation -----------------------------------------------------------------------


def test_vrma_expressions_follow_the_speech(speech):
    audio, rate, cues, duration = speech
    data = cue_file(FORMATS["vrma"], cues, duration, fps=30.0)
    weights = vrma_weights(*glb_chunks(data))
    # The clip lasts as long as the sound: a player ends it at its last key.
    assert {float(times[-1]) for times, _ in weights.values()} == {float(np.float32(duration))}

    def at(name, t):
        times, values = weights[name]
        return float(np.interp(t, times, values))

    margin = MAX_BLEND_HALF_WIDTH + 1 / 30
    assert max(at(name, t) for name in VRM1_VOWELS for t in _pauses(audio, rate, margin)) == 0.0
    long = [c for c in cues if c.end - c.start >= 2 * margin + 1 / 30]
    for c in long:
        index = VISEME_INDEX[c.value]
        shape = mouth_shape(MouthPose(index, index, 1.0, OPENNESS[c.value])).named(VRM1_VOWELS)
        mid = (c.start + c.end) / 2
        for name in VRM1_VOWELS:
            assert at(name, mid) == pytest.approx(shape[name], abs=1e-6), (c, name)
    # "five", "Bob": aa is fully open somewhere; "Hello": oh is there too.
    assert max(weights["aa"][1]) == 1.0 and max(weights["oh"][1]) > 0.5


def test_vrma_reads_back_with_pygltflib(speech, tmp_path):
    pygltflib = pytest.importorskip("pygltflib")
    _, _, cues, duration = speech
    path = tmp_path / "talk.vrma"
    path.write_bytes(cue_file(FORMATS["vrma"], cues, duration))
    gltf = pygltflib.GLTF2().load_binary(path)
    document, blob = glb_chunks(path.read_bytes())
    assert gltf.asset.version == "2.0"
    assert gltf.extensions["VRMC_vrm_animation"] == document["extensions"]["VRMC_vrm_animation"]
    assert [n.name for n in gltf.nodes] == list(VRM1_VOWELS)
    assert len(gltf.animations[0].channels) == len(VRM1_VOWELS)
    assert gltf.binary_blob()[: gltf.buffers[0].byteLength] == blob[: gltf.buffers[0].byteLength]


# --- the command line --------------------------------------------------------------------

def _run(args):
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True,
                          timeout=180, cwd=REPO, env=dict(os.environ))


def test_say_and_lipsync_write_the_format_the_suffix_names(tmp_path):
    wav, dat, motion = tmp_path / "s.wav", tmp_path / "s.dat", tmp_path / "l.motion3.json"
    said = _run(["say", TEXT, "--wav", str(wav), "--cues", str(dat), "--fps", "30"])
    assert said.returncode == 0, said.stderr
    assert moho_switches(dat.read_text())[-1][1] == "X"
    synced = _run(["lipsync", str(wav), "--out", str(motion)])
    assert synced.returncode == 0, synced.stderr
    assert json.loads(motion.read_text())["Meta"]["Fps"] == DEFAULT_FPS


def test_render_writes_cues_on_the_videos_frames(tmp_path):
    video, dat, tone, tsv = (tmp_path / n for n in ("v.mp4", "v.dat", "tone.wav", "t.tsv"))
    result = _run(["render", "Bob made five pies.", "--out", str(video), "--height", "120",
                   "--fps", "10", "--cues", str(dat)])
    assert result.returncode == 0, result.stderr
    frames = int(result.stdout.split(" frames at ")[0].rsplit(" ", 1)[1])
    pairs = moho_switches(dat.read_text())
    assert pairs[-1][1] == "X" and pairs[-1][0] <= frames + 1
    assert len(_frame_shapes(pairs, frames)) == frames and len(pairs) >= 5
    # A recording's cues are the model's, as its video's mouth follows them.
    _write_tone(tone)
    result = _run(["render", "--audio", str(tone), "--out", str(tmp_path / "t.mp4"),
                   "--height", "120", "--fps", "10", "--cues", str(tsv)])
    assert result.returncode == 0, result.stderr
    rows = list(csv.reader(io.StringIO(tsv.read_text()), delimiter="\t"))
    assert rows[0][0] == "0.00" and rows[-1] == ["1.00", "X"]


@pytest.mark.parametrize("args, says", [
    (["lipsync", "{wav}", "--out", "{tmp}/c.vtt"],
     "{tmp}/c.vtt: WebVTT captions hold words, and a recording has none to caption"),
    (["lipsync", "{wav}", "--out", "{tmp}/c.xml", "--format", "tsv"],
     "{tmp}/c.xml: .xml is for Rhubarb's XML of shapes A-H and X, not --format tsv"),
    (["lipsync", "{wav}", "--out", "{tmp}/c.txt"], "{tmp}/c.txt: cannot tell the cue format"),
    (["lipsync", "{wav}", "--out", "{tmp}/c.tsv", "--fps", "30"], "--fps is for the frames of"),
    (["say", "Hi", "--format", "rhubarb"], "--format says how the --cues file is written"),
    (["render", "--audio", "{wav}", "--out", "{tmp}/v.mp4", "--cues", "{tmp}/c.srt"],
     "{tmp}/c.srt: SRT captions hold words"),
])
def test_wrong_cue_files_are_refused_in_one_line(tmp_path, args, says):
    wav = tmp_path / "tone.wav"
    _write_tone(wav)
    args = [a.format(tmp=tmp_path, wav=wav) for a in args]
    result = _run(args)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert says.format(tmp=tmp_path) in result.stderr and "Traceback" not in result.stderr
    assert not any(tmp_path.glob("c.*"))


def _write_tone(path: Path) -> None:
    t = np.arange(16000) / 16000
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes((np.sin(2 * np.pi * 220 * t) * 8000).astype("<i2").tobytes())
