"""The command line as a user runs it: real voice, real model, files on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import wave
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from pipeline.core.visemes import OVR_VISEMES
from tests.harness.cli import REPO, assert_refused, run_cli

TEXT = "Papa made a map of five big boats. Wow, what a view!"


def test_without_a_display_it_says_so_and_exits_non_zero():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    result = subprocess.run([sys.executable, "-m", "app"], capture_output=True, text=True, env=env,
                            timeout=60, cwd=REPO)
    assert result.returncode == 2
    assert "no display" in result.stderr and "xvfb-run" in result.stderr


@pytest.mark.parametrize("fmt, allowed", [("ovr", set(OVR_VISEMES)), ("rhubarb", set("ABCDEFGHX"))])
def test_say_writes_speech_and_cues_that_cover_it(tmp_path, fmt, allowed):
    wav, cues = tmp_path / "out.wav", tmp_path / "out.json"
    result = run_cli(["say", TEXT, "--wav", str(wav), "--cues", str(cues), "--format", fmt])
    assert result.returncode == 0, result.stderr
    assert "time to first audio" in result.stdout
    with wave.open(str(wav)) as f:
        duration = f.getnframes() / f.getframerate()
        assert f.getframerate() == 22050 and duration > 2
    document = json.loads(cues.read_text())
    mouth = document["mouthCues"]
    assert document["metadata"]["visemeSet"] == ("ovr15" if fmt == "ovr" else "rhubarb")
    assert mouth[0]["start"] == 0
    assert abs(mouth[-1]["end"] - duration) <= 0.001
    assert abs(document["metadata"]["duration"] - duration) <= 0.001
    assert all(a["end"] == b["start"] for a, b in zip(mouth, mouth[1:]))
    assert {c["value"] for c in mouth} <= allowed
    assert len({c["value"] for c in mouth}) >= 6


def test_say_refuses_empty_text_with_a_message(tmp_path):
    result = run_cli(["say", "  ", "--wav", str(tmp_path / "x.wav")])
    assert result.returncode == 1
    assert "Nothing to speak" in result.stderr and "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def seeded_speech(tmp_path_factory):
    """`say TEXT --seed 1 --wav` and `lipsync` of that WAV, made once for the tests that
    read them (each `say` took 2.7 s on the 2-vCPU VM). Not to be written to."""
    folder = tmp_path_factory.mktemp("seeded")
    wav, cues = folder / "speech.wav", folder / "wav.json"
    result = run_cli(["say", TEXT, "--wav", str(wav), "--seed", "1"])
    assert result.returncode == 0, result.stderr
    assert "no warm-up" in result.stdout
    assert run_cli(["lipsync", str(wav), "--out", str(cues)]).returncode == 0
    return wav, cues


def test_say_to_a_file_skips_the_warm_up_and_writes_what_a_warmed_voice_says(seeded_speech):
    # Warm-up is for speech heard as it is made; the file's samples must not depend on it.
    from app.cli import _render
    from pipeline.audio.pcm import pcm16
    from pipeline.voice.cues import concat_tracks
    from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS

    tts = StreamingTTS(seed=1)
    try:
        tts.warm_up()
        _, segments = _render(tts, TEXT, LATENCY_MODES["balanced"], 1.0)
    finally:
        tts.close()
    audio, _ = concat_tracks(segments)
    with wave.open(str(seeded_speech[0])) as f:
        written = f.readframes(f.getnframes())
    assert written == pcm16(audio)


def test_lipsync_writes_cues_for_a_wav_file(seeded_speech):
    wav, cues = seeded_speech
    with wave.open(str(wav)) as f:
        duration = f.getnframes() / f.getframerate()
    mouth = json.loads(cues.read_text())["mouthCues"]
    assert abs(mouth[-1]["end"] - duration) <= 0.001 and mouth[0]["start"] == 0
    values = {c["value"] for c in mouth}
    assert values <= set(OVR_VISEMES) and {"PP", "aa"} <= values


def _encode(wav: Path, out: Path, container: str, codec: str, rate: int | None = None,
            video: bool = False) -> None:
    """`wav` re-encoded with PyAV as a user's recording would come (a video file with a
    picture track too)."""
    import av

    with wave.open(str(wav)) as f:
        source_rate = f.getframerate()
        samples = np.frombuffer(f.readframes(f.getnframes()), "<i2")
    with av.open(str(out), "w", format=container) as dst:
        if video:
            picture = dst.add_stream("libx264", rate=25)
            picture.width, picture.height, picture.pix_fmt = 64, 64, "yuv420p"
        sound = dst.add_stream(codec, rate=rate or source_rate)
        sound.layout = "mono"
        resampler = av.AudioResampler(format=sound.format.name, layout="mono", rate=rate or source_rate)
        for start in range(0, len(samples), 4096):
            frame = av.AudioFrame.from_ndarray(samples[None, start:start + 4096].copy(),
                                               format="s16", layout="mono")
            # Timestamps as a recorder gives them: with them the encoder's priming (AAC's
            # 1024 samples) is marked in the file, for a decoder to drop.
            frame.sample_rate, frame.pts = source_rate, start
            frame.time_base = Fraction(1, source_rate)
            for converted in resampler.resample(frame):
                dst.mux(sound.encode(converted))
        for converted in resampler.resample(None):
            dst.mux(sound.encode(converted))
        dst.mux(sound.encode(None))
        if video:
            for n in range(25):
                image = av.VideoFrame.from_ndarray(np.full((64, 64, 3), n * 10, np.uint8),
                                                   format="rgb24")
                dst.mux(picture.encode(image))
            dst.mux(picture.encode(None))


def _frames(mouth: list[dict], step: float = 0.01) -> list[str]:
    """The viseme at every 10 ms of a cue list."""
    out, k = [], 0
    t = step / 2
    while t < mouth[-1]["end"]:
        while mouth[k]["end"] <= t:
            k += 1
        out.append(mouth[k]["value"])
        t += step
    return out


@pytest.mark.parametrize("name, container, codec, rate, video, agreement", [
    # Lossless: the same samples, the same cues.
    ("speech.flac", "flac", "flac", None, False, 1.0),
    # Lossy codecs change the waveform the model hears a little; measured agreement of
    # the 10 ms viseme frames with the WAV's cues: mp3 0.91, opus in Ogg (48 kHz) 0.97,
    # m4a and mp4 (AAC) 0.94. (This PyAV has no Vorbis encoder to make an .ogg of.)
    ("speech.mp3", "mp3", "libmp3lame", None, False, 0.85),
    ("speech.opus", "ogg", "libopus", 48000, False, 0.85),
    ("speech.m4a", "ipod", "aac", None, False, 0.85),
    ("clip.mp4", "mp4", "aac", None, True, 0.85),
])
def test_lipsync_reads_the_formats_people_record_in(tmp_path, seeded_speech, name, container,
                                                      codec, rate, video, agreement):
    from pipeline.audio.audio_file import audio_info

    wav, wav_cues = seeded_speech
    _encode(wav, tmp_path / name, container, codec, rate, video)
    result = run_cli(["lipsync", str(tmp_path / name), "--out", str(tmp_path / "cues.json")])
    assert result.returncode == 0, result.stderr
    mouth = json.loads((tmp_path / "cues.json").read_text())["mouthCues"]
    reference = json.loads(wav_cues.read_text())["mouthCues"]
    # The cues end where the decoded sound does (counted, not the header's estimate),
    # within a codec frame or two of padding of the WAV's own length.
    assert abs(mouth[-1]["end"] - audio_info(tmp_path / name).duration) <= 0.011
    assert abs(mouth[-1]["end"] - reference[-1]["end"]) < 0.1
    ours, theirs = _frames(mouth), _frames(reference)
    n = min(len(ours), len(theirs))
    same = sum(a == b for a, b in zip(ours[:n], theirs[:n])) / n
    assert same >= agreement


def test_version_and_which_commands_open_no_window():
    from app.cli import version

    result = run_cli(["--version"])
    assert result.returncode == 0 and result.stdout.strip() == f"lipsync-studio {version()}"
    assert version().split()[0] == "0.1.0"
    shown = " ".join(run_cli(["--help"]).stdout.split())
    assert ("These open no window: say, lipsync, render, voices, avatars, obs setup, api token, "
            "and "
            "--headless") in shown


def test_render_takes_the_settings_avatar_and_background_unless_told(tmp_path):
    import av

    config = tmp_path / "config"
    config.mkdir()
    (config / "settings.json").write_text(json.dumps({"background": "#ff0000"}))
    out = tmp_path / "v.mp4"
    result = run_cli(["render", "Hi.", "--out", str(out), "--height", "240"], config=config)
    assert result.returncode == 0, result.stderr
    with av.open(str(out)) as video:
        first = next(video.decode(video=0)).to_ndarray(format="rgb24")
    r, g, b = first[2, 2].astype(int)  # a corner: background, not avatar
    assert r > 200 and g < 40 and b < 40, (r, g, b)
    # --background wins over the setting.
    result = run_cli(["render", "Hi.", "--out", str(out), "--height", "240", "--background", "#0000ff"],
                     config=config)
    with av.open(str(out)) as video:
        first = next(video.decode(video=0)).to_ndarray(format="rgb24")
    assert first[2, 2, 2] > 200 and first[2, 2, 0] < 40
    # The settings' avatar is the one rendered: a missing one is said by its path.
    (config / "settings.json").write_text(json.dumps({"avatar_manifest": str(tmp_path / "gone.json")}))
    result = run_cli(["render", "Hi.", "--out", str(out)], config=config)
    assert result.returncode == 1 and str(tmp_path / "gone.json") in result.stderr


NO_FILE_IN_PROC = "no file can be created in /proc (No such file or directory)"


@pytest.mark.parametrize("args, message", [
    (["say", "Hi", "--wav", "{tmp}/folder"], "cannot write {tmp}/folder: it is a folder"),
    (["say", "Hi", "--wav", "{tmp}/missing/x.wav"],
     "cannot write {tmp}/missing/x.wav: folder {tmp}/missing does not exist"),
    (["say", "Hi", "--wav", "{tmp}/file.txt/x.wav"],
     "cannot write {tmp}/file.txt/x.wav: {tmp}/file.txt is not a folder"),
    (["say", "Hi", "--wav", "/proc/x.wav"], f"cannot write /proc/x.wav: {NO_FILE_IN_PROC}"),
    # The speech is not written either when the cues cannot be.
    (["say", "Hi", "--wav", "{tmp}/speech.wav", "--cues", "{tmp}/folder"],
     "cannot write {tmp}/folder: it is a folder"),
    (["say", "Hi", "--cues", "/proc/x.json"], f"cannot write /proc/x.json: {NO_FILE_IN_PROC}"),
    (["say", "Hi", "--cues", "{tmp}/missing/c.json"],
     "cannot write {tmp}/missing/c.json: folder {tmp}/missing does not exist"),
    (["lipsync", "{tmp}/folder", "--out", "{tmp}/c.json"], "{tmp}/folder is a folder, not an audio file"),
    (["lipsync", "{tmp}/nobody.wav", "--out", "{tmp}/c.json"], "Audio file not found: {tmp}/nobody.wav"),
    (["lipsync", "/proc/x.wav", "--out", "{tmp}/c.json"], "Audio file not found: /proc/x.wav"),
    (["lipsync", "{tmp}/notes.wav", "--out", "{tmp}/c.json"],
     "{tmp}/notes.wav is not an audio or video file this app can read (Invalid data found"),
    (["lipsync", "{tmp}/empty.wav", "--out", "{tmp}/c.json"], "{tmp}/empty.wav is empty, not an audio file"),
    (["lipsync", "{tmp}/nothing.wav", "--out", "{tmp}/c.json"], "{tmp}/nothing.wav holds no audio"),
    (["lipsync", "{tmp}/tone.wav", "--out", "{tmp}/folder"], "cannot write {tmp}/folder: it is a folder"),
    (["lipsync", "{tmp}/tone.wav", "--out", "/proc/x.json"], f"cannot write /proc/x.json: {NO_FILE_IN_PROC}"),
    (["lipsync", "{tmp}/tone.wav", "--out", "{tmp}/missing/c.json"],
     "cannot write {tmp}/missing/c.json: folder {tmp}/missing does not exist"),
])
def test_say_and_lipsync_explain_a_bad_path_in_one_line(places, args, message):
    assert_refused(args, places, message)


@pytest.mark.parametrize("args, message", [
    (["Hi", "--out", "{tmp}/folder"], "cannot write {tmp}/folder: it is a folder"),
    (["Hi", "--out", "/proc/x.mp4"], f"cannot write /proc/x.mp4: {NO_FILE_IN_PROC}"),
    (["Hi", "--out", "{tmp}/missing/v.mp4"],
     "cannot write {tmp}/missing/v.mp4: folder {tmp}/missing does not exist"),
    (["--audio", "{tmp}/folder", "--out", "{tmp}/v.mp4"], "{tmp}/folder is a folder, not an audio file"),
    (["--audio", "{tmp}/nobody.wav", "--out", "{tmp}/v.mp4"], "Audio file not found: {tmp}/nobody.wav"),
    (["--audio", "{tmp}/notes.wav", "--out", "{tmp}/v.mp4"],
     "{tmp}/notes.wav is not an audio or video file this app can read"),
    (["--audio", "{tmp}/empty.wav", "--out", "{tmp}/v.mp4"], "{tmp}/empty.wav is empty, not an audio file"),
    (["--audio", "{tmp}/nothing.wav", "--out", "{tmp}/v.mp4"], "{tmp}/nothing.wav holds no audio"),
    (["Hi", "--avatar", "{tmp}/folder", "--out", "{tmp}/v.mp4"],
     "Avatar rig manifest not found: {tmp}/folder/manifest.json"),
    (["Hi", "--avatar", "{tmp}/nobody.png", "--out", "{tmp}/v.mp4"], "Avatar not found: {tmp}/nobody.png"),
    (["Hi", "--avatar", "/proc/x", "--out", "{tmp}/v.mp4"], "Avatar not found: /proc/x"),
    (["Hi", "--avatar", "{tmp}/notes.wav", "--out", "{tmp}/v.mp4"],
     "Avatar rig manifest {tmp}/notes.wav is not valid JSON"),
    (["Hi", "--avatar", "{tmp}/empty.png", "--out", "{tmp}/v.mp4"],
     "The picture empty.png is not a picture Lipsync Studio can read"),
])
def test_render_explains_a_bad_path_in_one_line(places, args, message):
    assert_refused(["render", *args], places, message)


def test_a_command_line_that_cannot_be_parsed_exits_2(places):
    result = run_cli(["lipsync", str(places / "tone.wav")])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "lipsync-studio lipsync: error: the following arguments are required: --out")


def test_the_mode_choices_are_the_voices_latency_modes():
    from app.cli import MODE_NAMES
    from pipeline.voice.streaming_tts import LATENCY_MODES

    assert MODE_NAMES == tuple(LATENCY_MODES)


GERMAN = "de_DE-joe-medium"


@pytest.fixture(scope="module")
def voice_config(tmp_path_factory):
    """A config folder whose voices folder holds a second voice (the bundled model, read
    as German) and a broken one (a config that is not JSON)."""
    from tests.harness.voices import make_voice

    config = tmp_path_factory.mktemp("voice-config")
    make_voice(config / "voices", GERMAN)
    broken = make_voice(config / "voices", "xx_XX-broken-medium")
    broken.config.write_text("{ this is not json")
    return config


def test_voices_lists_the_installed_and_names_the_broken(voice_config):
    from pipeline.voice.voice_files import BUNDLED_VOICE

    result = run_cli(["voices"], config=voice_config)
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows[0] == ["NAME", "LANGUAGE", "QUALITY", "RATE", "SPEAKERS", "PATH"]
    assert rows[1] == [BUNDLED_VOICE.name, "en-us", "medium", "22050", "Hz", "1",
                       str(BUNDLED_VOICE.model)]
    assert rows[2] == [GERMAN, "de", "medium", "22050", "Hz", "1",
                       str(voice_config / "voices" / f"{GERMAN}.onnx")]
    assert str(voice_config / "voices") in result.stdout
    broken = voice_config / "voices" / "xx_XX-broken-medium.onnx.json"
    assert result.stderr.splitlines() == [
        f"note: not usable: {broken}: is not a voice config (not valid JSON: Expecting property "
        "name enclosed in double quotes: line 1 column 3 (char 2))."]
    listed = json.loads(run_cli(["voices", "--json"], config=voice_config).stdout)
    assert listed["folder"] == str(voice_config / "voices")
    assert [v["name"] for v in listed["voices"]] == [BUNDLED_VOICE.name, GERMAN]
    assert listed["voices"][1] == {"name": GERMAN, "language": "de", "quality": "medium",
                                   "sample_rate": 22050, "speakers": [], "bundled": False,
                                   "path": str(voice_config / "voices" / f"{GERMAN}.onnx")}


def _said(tmp_path, config, *args):
    """(audio, cue values) of `say` with `args` on one German sentence."""
    wav, cues = tmp_path / "said.wav", tmp_path / "said.json"
    result = run_cli(["say", "Guten Tag, wie geht es dir?", "--wav", str(wav), "--cues", str(cues),
                      "--seed", "1", *args], config=config)
    assert result.returncode == 0, result.stderr
    with wave.open(str(wav)) as f:
        audio = np.frombuffer(f.readframes(f.getnframes()), "<i2")
    return audio, [c["value"] for c in json.loads(cues.read_text())["mouthCues"]]


def test_say_speaks_with_the_voice_chosen(tmp_path, voice_config):
    english, english_cues = _said(tmp_path, voice_config)
    german, german_cues = _said(tmp_path, voice_config, "--voice", GERMAN)
    by_path, _ = _said(tmp_path, voice_config, "--voice",
                       str(voice_config / "voices" / f"{GERMAN}.onnx"))
    # Sound came out (a seeded voice peaks near half of full scale; silence is 0), the
    # same by name and by path, and it is another reading of the text than English's.
    assert np.abs(german).max() > 0.2 * 32767
    assert np.array_equal(german, by_path)
    assert len(german) != len(english) and german_cues != english_cues
    # The settings' voice is the default.
    settings = voice_config / "settings.json"
    settings.write_text(json.dumps({"voice": GERMAN}))
    try:
        from_settings, _ = _said(tmp_path, voice_config)
    finally:
        settings.unlink()
    assert np.array_equal(from_settings, german)


@pytest.mark.parametrize("args, message", [
    (["say", "Hi", "--voice", "de_DE-nobody", "--wav", "{out}"],
     "No voice named 'de_DE-nobody'. Installed: en_US-joe-medium, de_DE-joe-medium "),
    (["render", "Hi", "--voice", "de_DE-nobody", "--out", "{out}"],
     "No voice named 'de_DE-nobody'. Installed: en_US-joe-medium, de_DE-joe-medium "),
    (["say", "Hi", "--voice", "xx_XX-broken-medium", "--wav", "{out}"],
     "{voices}/xx_XX-broken-medium.onnx.json: is not a voice config (not valid JSON"),
    (["say", "Hi", "--voice", "{voices}/xx_XX-broken-medium.onnx", "--wav", "{out}"],
     "{voices}/xx_XX-broken-medium.onnx.json: is not a voice config (not valid JSON"),
    (["say", "Hi", "--voice", "/nowhere/x.onnx", "--wav", "{out}"],
     "Voice not found: /nowhere/x.onnx"),
    (["say", "Hi", "--speaker", "2", "--wav", "{out}"],
     "--speaker is for a voice of several speakers; en_US-joe-medium has one"),
    (["render", "Hi", "--face", "1", "--out", "{out}"],
     "--face picks a face in a picture (PNG/JPG);"),
])
def test_a_voice_or_face_that_cannot_be_used_is_refused_in_one_line(tmp_path, voice_config, args,
                                                                   message):
    voices = voice_config / "voices"
    out = tmp_path / ("x.wav" if args[0] == "say" else "x.mp4")
    result = run_cli([a.format(out=out, voices=voices) for a in args], config=voice_config)
    lines = result.stderr.splitlines()
    assert "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1 and lines[0].startswith(
        "lipsync-studio: " + message.format(voices=voices)), result.stderr
    assert result.returncode == 1 and not out.exists()


def test_render_face_picks_one_face_of_several(tmp_path):
    import av
    from PIL import Image
    from skimage.data import astronaut

    face = astronaut()[40:296, 100:356]
    picture = tmp_path / "two.png"
    Image.fromarray(np.concatenate([face, face[:, ::-1]], axis=1)).save(picture)
    out = tmp_path / "v.mp4"
    refused = run_cli(["render", "Papa made a map.", "--avatar", str(picture), "--out", str(out)])
    assert refused.returncode == 1 and "shows 2 faces" in refused.stderr
    # The faces are listed as --face takes them, and how to pick one is said.
    assert "  face 0: " in refused.stderr and "  face 1: " in refused.stderr
    assert "Choose one with --face N." in refused.stderr
    assert "Traceback" not in refused.stderr and not out.exists()
    wrong = run_cli(["render", "Hi.", "--avatar", str(picture), "--face", "5", "--out", str(out)])
    assert wrong.returncode == 1 and "Face number 5 does not exist" in wrong.stderr
    assert not out.exists()
    # Motion off: then only the talking face's mouth and eyes change from frame to frame.
    config = tmp_path / "config"
    config.mkdir()
    (config / "settings.json").write_text(json.dumps(
        {"motion_bounce": 0.0, "motion_tilt": 0.0, "motion_sway": 0.0, "motion_shake": 0.0,
         "motion_head_turn": 0.0}))
    moved = {}
    for face in (0, 1):
        result = run_cli(["render", "Papa made a map.", "--avatar", str(picture), "--face",
                          str(face), "--out", str(out), "--fps", "10"], config=config)
        assert result.returncode == 0, result.stderr
        with av.open(str(out)) as video:
            assert (video.streams.video[0].width, video.streams.video[0].height) == (512, 256)
            frames = np.stack([f.to_ndarray(format="gray").astype(int)
                               for f in video.decode(video=0)])
        change = np.abs(np.diff(frames, axis=0)).max(axis=0) > 40
        # Beside the seam the talking face's warp may reach over (its border is 2.3 times
        # its face oval: render/rigs/photo_face.py): each half less 32 px at the middle.
        moved[face] = (change[:, :224].sum(), change[:, 288:].sum())
    # Face 0 is the left one (faces are numbered left to right): its half moves, the other
    # only by the H.264 encoder's requantization (measured 12-18 pixels against ~2,200).
    assert moved[0][0] > 500 and moved[0][1] < 0.02 * moved[0][0], moved
    assert moved[1][1] > 500 and moved[1][0] < 0.02 * moved[1][1], moved


def test_say_speaker_picks_by_number_or_name_and_lists_the_speakers(tmp_path):
    from tests.harness.voices import make_multi_speaker_voice

    files = make_multi_speaker_voice(tmp_path / "voices", {"alice": 0, "bob": 2})
    wav = tmp_path / "bob.wav"
    for speaker in ("bob", "2"):
        result = run_cli(["say", "Hello.", "--voice", str(files.model), "--speaker", speaker,
                          "--wav", str(wav)])
        assert result.returncode == 0, result.stderr
    result = run_cli(["say", "Hello.", "--voice", str(files.model), "--speaker", "carol",
                      "--wav", str(tmp_path / "carol.wav")])
    assert result.returncode == 1 and result.stderr.splitlines() == [
        f"lipsync-studio: --speaker carol: {files.name} has no such speaker; its speakers are "
        "0: alice, 1, 2: bob"]


def test_render_draws_the_expression_asked_for_and_refuses_one_the_avatar_lacks(tmp_path):
    import av

    config = tmp_path / "config"
    config.mkdir()
    # Motion off: the frames then differ only by the expression's layers.
    (config / "settings.json").write_text(json.dumps(
        {"motion_bounce": 0.0, "motion_tilt": 0.0, "motion_sway": 0.0, "motion_shake": 0.0}))
    frames = {}
    for name in ("neutral", "happy"):
        out = tmp_path / f"{name}.mp4"
        result = run_cli(["render", "Hi.", "--out", str(out), "--height", "240",
                          "--expression", name], config=config)
        assert result.returncode == 0, result.stderr
        with av.open(str(out)) as video:
            frames[name] = next(video.decode(video=0)).to_ndarray(format="rgb24").astype(int)
    changed = np.abs(frames["happy"] - frames["neutral"]).max(axis=2) > 24
    # Happy swaps the eyes and adds blush: a real share of the picture, not all of it.
    assert 0.002 < changed.mean() < 0.3, changed.mean()
    refused = run_cli(["render", "Hi.", "--out", str(tmp_path / "x.mp4"), "--expression", "smug"],
                      config=config)
    assert refused.returncode == 1
    assert "no expression 'smug'" in refused.stderr and "happy" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_lipsync_with_the_transcript_takes_its_shapes_from_the_words(tmp_path):
    """`lipsync --text` and `--transcript` on a real recording (a dev-set clip): the
    written cues are the aligner's, a word the audio does not bear out is said, and a
    transcript with nothing to align is refused in one line."""
    import wave

    from bench.real_speech import pocketsphinx_clips
    from pipeline.lipsync.forced_align import transcript_cues

    first = pocketsphinx_clips.clips(pocketsphinx_clips.CACHE)[0]
    audio, text = first.audio, first.text
    clip = tmp_path / "clip.wav"
    with wave.open(str(clip), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
        w.writeframes((np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes())
    out = tmp_path / "cues.json"
    result = run_cli(["lipsync", str(clip), "--text", text, "--out", str(out)])
    assert result.returncode == 0, result.stderr
    assert "shapes from the transcript" in result.stdout
    written = [c["value"] for c in json.loads(out.read_text())["mouthCues"]]
    assert written == [c.value for c in transcript_cues(clip, text).cues]
    transcript = tmp_path / "words.txt"
    transcript.write_text(text + " banana", encoding="utf-8")
    result = run_cli(["lipsync", str(clip), "--transcript", str(transcript), "--out", str(out)])
    assert result.returncode == 0 and "'banana'" in result.stderr, result.stderr
    refused = run_cli(["lipsync", str(clip), "--text", "😀", "--out", str(out)])
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1
    assert "Traceback" not in refused.stderr
