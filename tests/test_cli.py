"""The command line as a user runs it: real voice, real model, files on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import wave
from pathlib import Path

import pytest

from pipeline.visemes import OVR_VISEMES

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


@pytest.mark.parametrize("content, message", [
    (b"not audio at all", "not a readable WAV"),
    (None, "no such file"),
])
def test_lipsync_explains_bad_input(tmp_path, content, message):
    path = tmp_path / "in.wav"
    if content is not None:
        path.write_bytes(content)
    result = _run(["lipsync", str(path), "--out", str(tmp_path / "c.json")])
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr


def test_the_mode_choices_are_the_voices_latency_modes():
    from app.cli import MODE_NAMES
    from pipeline.streaming_tts import LATENCY_MODES

    assert MODE_NAMES == tuple(LATENCY_MODES)
