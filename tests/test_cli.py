"""The command line as a user runs it: real voice, real model, files on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from pipeline.core.visemes import OVR_VISEMES

REPO = Path(__file__).resolve().parent.parent
TEXT = "Papa made a map of five big boats. Wow, what a view!"


def _run(args, timeout=120):
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def test_without_a_display_it_says_so_and_exits_non_zero():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    result = subprocess.run([sys.executable, "-m", "app"], capture_output=True, text=True, env=env,
                            timeout=60, cwd=REPO)
    assert result.returncode == 2
    assert "no display" in result.stderr and "xvfb-run" in result.stderr


@pytest.mark.parametrize("fmt, allowed", [("ovr", set(OVR_VISEMES)), ("rhubarb", set("ABCDEFGHX"))])
def test_say_writes_speech_and_cues_that_cover_it(tmp_path, fmt, allowed):
    wav, cues = tmp_path / "out.wav", tmp_path / "out.json"
    result = _run(["say", TEXT, "--wav", str(wav), "--cues", str(cues), "--format", fmt])
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
    result = _run(["say", "  ", "--wav", str(tmp_path / "x.wav")])
    assert result.returncode == 1
    assert "Nothing to speak" in result.stderr and "Traceback" not in result.stderr


def test_lipsync_writes_cues_for_a_wav_file(tmp_path):
    wav, cues = tmp_path / "speech.wav", tmp_path / "cues.json"
    assert _run(["say", TEXT, "--wav", str(wav)]).returncode == 0
    result = _run(["lipsync", str(wav), "--out", str(cues)])
    assert result.returncode == 0, result.stderr
    with wave.open(str(wav)) as f:
        duration = f.getnframes() / f.getframerate()
    mouth = json.loads(cues.read_text())["mouthCues"]
    assert abs(mouth[-1]["end"] - duration) <= 0.001 and mouth[0]["start"] == 0
    values = {c["value"] for c in mouth}
    assert values <= set(OVR_VISEMES) and {"PP", "aa"} <= values


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """Paths a user might get wrong, each in its own way."""
    tmp = tmp_path_factory.mktemp("places").resolve()
    (tmp / "folder").mkdir()
    (tmp / "file.txt").write_text("not a folder")
    (tmp / "notes.wav").write_text("these are words, not sound")
    (tmp / "empty.wav").write_bytes(b"")
    (tmp / "empty.png").write_bytes(b"")
    rate = 16_000
    with wave.open(str(tmp / "nothing.wav"), "wb") as f:  # a header and no samples
        f.setnchannels(1), f.setsampwidth(2), f.setframerate(rate)
    with wave.open(str(tmp / "tone.wav"), "wb") as f:
        f.setnchannels(1), f.setsampwidth(2), f.setframerate(rate)
        tone = 0.3 * np.sin(2 * np.pi * 220 * np.arange(rate // 2) / rate)
        f.writeframes((tone * 32767).astype("<i2").tobytes())
    return tmp


def _refused(args, places, message, exit_code=1):
    """Runs the CLI on ``args`` ({tmp} is ``places``); it must say ``message`` (what it
    starts with) on one line of stderr, exit ``exit_code`` and write no file."""
    before = sorted(places.rglob("*"))
    result = _run([a.format(tmp=places) for a in args])
    lines = result.stderr.splitlines()
    assert "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1 and lines[0].startswith(f"lipsync-studio: {message.format(tmp=places)}"), \
        result.stderr
    assert result.returncode == exit_code
    assert sorted(places.rglob("*")) == before


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
    (["lipsync", "{tmp}/folder", "--out", "{tmp}/c.json"], "{tmp}/folder is a folder, not a WAV file"),
    (["lipsync", "{tmp}/nobody.wav", "--out", "{tmp}/c.json"], "Audio file not found: {tmp}/nobody.wav"),
    (["lipsync", "/proc/x.wav", "--out", "{tmp}/c.json"], "Audio file not found: /proc/x.wav"),
    (["lipsync", "{tmp}/notes.wav", "--out", "{tmp}/c.json"],
     "{tmp}/notes.wav is not a readable PCM WAV file (file does not start with RIFF id)"),
    (["lipsync", "{tmp}/empty.wav", "--out", "{tmp}/c.json"], "{tmp}/empty.wav is empty, not a WAV file"),
    (["lipsync", "{tmp}/nothing.wav", "--out", "{tmp}/c.json"], "{tmp}/nothing.wav holds no audio"),
    (["lipsync", "{tmp}/tone.wav", "--out", "{tmp}/folder"], "cannot write {tmp}/folder: it is a folder"),
    (["lipsync", "{tmp}/tone.wav", "--out", "/proc/x.json"], f"cannot write /proc/x.json: {NO_FILE_IN_PROC}"),
    (["lipsync", "{tmp}/tone.wav", "--out", "{tmp}/missing/c.json"],
     "cannot write {tmp}/missing/c.json: folder {tmp}/missing does not exist"),
])
def test_say_and_lipsync_explain_a_bad_path_in_one_line(places, args, message):
    _refused(args, places, message)


@pytest.mark.parametrize("args, message", [
    (["Hi", "--out", "{tmp}/folder"], "cannot write {tmp}/folder: it is a folder"),
    (["Hi", "--out", "/proc/x.mp4"], f"cannot write /proc/x.mp4: {NO_FILE_IN_PROC}"),
    (["Hi", "--out", "{tmp}/missing/v.mp4"],
     "cannot write {tmp}/missing/v.mp4: folder {tmp}/missing does not exist"),
    (["--audio", "{tmp}/folder", "--out", "{tmp}/v.mp4"], "{tmp}/folder is a folder, not a WAV file"),
    (["--audio", "{tmp}/nobody.wav", "--out", "{tmp}/v.mp4"], "Audio file not found: {tmp}/nobody.wav"),
    (["--audio", "{tmp}/notes.wav", "--out", "{tmp}/v.mp4"],
     "{tmp}/notes.wav is not a readable PCM WAV file"),
    (["--audio", "{tmp}/empty.wav", "--out", "{tmp}/v.mp4"], "{tmp}/empty.wav is empty, not a WAV file"),
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
    _refused(["render", *args], places, message)


def test_a_command_line_that_cannot_be_parsed_exits_2(places):
    result = _run(["lipsync", str(places / "tone.wav")])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "lipsync-studio lipsync: error: the following arguments are required: --out")


def test_the_mode_choices_are_the_voices_latency_modes():
    from app.cli import MODE_NAMES
    from pipeline.voice.streaming_tts import LATENCY_MODES

    assert MODE_NAMES == tuple(LATENCY_MODES)
