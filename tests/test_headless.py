"""`lipsync-studio --headless` as a user runs it on a machine with no display: the real
app process, EGL for GL, the real voice on the JACK test server, the browser source's page
and frames fetched over loopback, stopped with Ctrl-C."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from tests.harness.app_process import Lines, free_port
from tests.harness.jack_recorder import JackRecorder

pytestmark = pytest.mark.audio


def _speech(audio: np.ndarray) -> bool:
    """Whether a recording holds speech: 0.1 s windows above -40 dBFS RMS, for at least
    0.3 s in all (the voice speaks at about -20 dBFS; silence from JACK is exact zeros)."""
    if len(audio) < 4800:
        return False
    windows = audio[: len(audio) // 4800 * 4800, 0].reshape(-1, 4800)
    rms = np.sqrt((windows.astype(np.float64) ** 2).mean(axis=1))
    return int((rms > 0.01).sum()) >= 3


def test_headless_serves_the_avatar_speaks_stdin_and_stops_on_ctrl_c(jack_server, tmp_path):
    from PIL import Image
    from websockets.sync.client import connect

    from render.outputs.browser_wire import HEADER, MAGIC

    port = free_port()
    (tmp_path / "settings.json").write_text(json.dumps(
        {"audio_output_device": "system", "mic_enabled": False}))
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["LIPSYNC_STUDIO_CONFIG_DIR"] = str(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "--headless", "--browser-source-port", str(port)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=env, start_new_session=True)
    output = Lines(proc)
    lines = output.seen
    try:
        line = output.until("Browser source: http://127.0.0.1", 60)
        assert f"http://127.0.0.1:{port}/" in line
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
        assert "<canvas" in page
        with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=10) as ws:
            deadline = time.monotonic() + 20
            frame = None
            while frame is None and time.monotonic() < deadline:
                message = ws.recv(timeout=10)
                if isinstance(message, bytes):
                    frame = message
        assert frame is not None, "no frame came"
        magic, _number, _media_time, width, height, x, y, w, h, encoding = HEADER.unpack_from(frame)
        assert magic == MAGIC and (width, height) == (1280, 720)
        body = frame[HEADER.size:]
        if encoding == 0:  # raw; 1 is PNG (browser_source's _ENCODING_CODES)
            visible = np.frombuffer(body, np.uint8).reshape(h, w, 4)
        else:
            visible = np.asarray(Image.open(io.BytesIO(body)).convert("RGBA"))
        # Drawn through EGL with no display: the avatar, and around it transparency (what
        # lies outside the visible rectangle is transparent by the wire format).
        assert 0 < w * h < width * height and (x, y) != (0, 0)
        assert (visible[..., 3] == 255).sum() > 1000
        # Where the voice runs and the frames are made, before it is ready: the browser
        # source's feed draws them (on this machine OpenGL, CUDA-GL interop said missing).
        line = output.until("The voice runs on", 90)
        print(f"\n{line.strip()}")
        assert "; mouth frames by OpenGL" in line or "; mouth frames by CUDA" in line, line
        output.until("Voice ready", 30)
        recorder = JackRecorder(max_seconds=12)
        recorder.start()
        try:
            proc.stdin.write("Hello from the terminal, in a line long enough to be still "
                             "speaking when the next one comes.\n")
            proc.stdin.flush()
            deadline = time.monotonic() + 6
            while time.monotonic() < deadline and not _speech(recorder.audio):
                time.sleep(0.1)
            # The typed line is spoken through the app's own PortAudio stream into JACK,
            # and its heard first audio is said.
            assert _speech(recorder.audio), "".join(lines)
            output.until("heard first audio", 10)
            # A line of emoji only, which the voice skips, is answered with why nothing
            # is said, and leaves the line being spoken alone (lines interrupt, the
            # default: it cut the speech, then failed).
            proc.stdin.write("\U0001F600\U0001F389\n")
            proc.stdin.flush()
            output.until("Nothing to speak: the text has only emoji", 10)
            answered = len(recorder.audio)
            time.sleep(0.6)  # 0.3 s of speech by _speech's measure, and room for the loop
            assert _speech(recorder.audio[answered:]), "the speech stopped"
        finally:
            recorder.stop()
        # A line with nothing to speak is answered, not dropped.
        proc.stdin.write("\n")
        proc.stdin.flush()
        output.until("Nothing to speak: the line was empty", 10)
        assert proc.poll() is None, "".join(lines)
        proc.send_signal(signal.SIGINT)
        output.until("Stopped.", 20)
        assert proc.wait(timeout=20) == 0
        assert not any("Traceback" in line for line in lines), "".join(lines)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
