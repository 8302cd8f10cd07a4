"""Faults injected into the real app, each recovered from without a restart and told to the
user once: `lipsync-studio --headless` in a process of its own (as a user runs it, its
messages read from its output), on a JACK server of its own that the tests stop, kill and
start again, with its config folder on a small disk that they fill up, and its API on.

docs/reliability.md lists every fault, what the user sees, and the test that proves it
(some in the modules of the parts they concern)."""

from __future__ import annotations

import time

import pytest

from tests.harness.api_client import http_json
from tests.harness.app_process import HeadlessApp, cli, free_port
from tests.harness.jack_recorder import RecorderProcess
from tests.harness.services import JackServer
from tests.harness.small_disk import DiskUnavailable, small_disk

pytestmark = pytest.mark.audio

SOUND_OFF = ("Audio is off: The sound server (JACK) stopped. Sound and the microphone come "
             "back by themselves once it runs again.")
SOUND_BACK = ("Sound is back: the sound server runs again (playing on 'system', the microphone "
              "'system' on).")
LONG_LINE = ("While this long sentence is being read out to everyone watching the stream, the "
             "sound server goes away and comes back, as a crashed or restarted one does.")
# What JACK's dummy driver hears of the voice: its speech peaks near full scale; silence
# is exactly 0.0.
HEARD = 0.05


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """The headless app with the API on, on a JACK server of its own, its config folder on
    a small disk (where one can be mounted), asked for TensorRT this machine lacks."""
    server = JackServer(suffix="faults")
    folder = tmp_path_factory.mktemp("faults")
    try:
        disk = small_disk(folder / "config", 8192)
        config = disk.__enter__()
    except DiskUnavailable as exc:
        disk, config = None, folder / "config"
        config.mkdir()
        why_no_disk = str(exc)
    made = cli(config, "api", "token", "create", "tester")
    assert made.returncode == 0, made.stderr
    port = free_port()
    running = HeadlessApp(config, {"audio_output_device": "system", "mic_device": "system",
                                   "inference_provider": "tensorrt"},
                          "--api-port", str(port), environment=server.environment)
    running.output.until("Voice ready", 90)
    running.server = server
    running.base = f"http://127.0.0.1:{port}"
    running.token = made.stdout.strip()
    running.disk = config if disk is not None else None
    running.why_no_disk = None if disk is not None else why_no_disk
    try:
        yield running
        assert running.stop() == 0, running.transcript
        assert "Traceback" not in running.transcript, running.transcript
    finally:
        if running.proc.poll() is None:
            running.stop()
        if disk is not None:
            disk.__exit__(None, None, None)
        if server.proc.poll() is None:
            server.stop()


def told(app, text: str, since: int = 0) -> int:
    """How many times the app printed the message `text` (from its output line `since`)."""
    return sum(line.rstrip("\n") == f"lipsync-studio: {text}" for line in app.output.seen[since:])


def messages(app, since: int) -> list[str]:
    """The messages the app printed from its output line `since` on."""
    return [line.removeprefix("lipsync-studio: ").rstrip("\n") for line in app.output.seen[since:]
            if line.startswith("lipsync-studio: ")]


def speak_and_record(app, line: str) -> float:
    """Type `line`, and the loudest of what the app plays from then until it has said it
    (its API's status: no longer speaking)."""
    recorder = RecorderProcess(app.server.environment)
    try:
        app.type(line)
        app.output.until("heard first audio", 20)
        deadline = time.monotonic() + 30
        while http_json(app.base, "/status", None, app.token)[1]["speaking"]:
            assert time.monotonic() < deadline, "the line never ended"
            time.sleep(0.1)
    finally:
        peak = recorder.peak()
    return peak


def test_the_sound_server_restarting_is_said_once_and_sound_comes_back(app):
    since = len(app.output.seen)
    app.server.stop()  # as a user restarting it (its clients are told it shuts down)
    app.output.until(SOUND_OFF, 10)
    time.sleep(1.0)  # the app looks for it meanwhile, quietly
    app.server.start()
    app.output.until(SOUND_BACK, 15)
    assert speak_and_record(app, "Hello again, everyone.") > HEARD
    said_once(app, since)


def said_once(app, since: int) -> None:
    """Sound going and coming back was said once each since output line `since`, and of
    the microphone at most that it is on (as at any start, when not still shown)."""
    said = messages(app, since)
    assert said.count(SOUND_OFF) == 1 and said.count(SOUND_BACK) == 1, said
    assert not [m for m in said if m.startswith(("Microphone", "No microphone", "Audio"))
                and m not in (SOUND_OFF, "Microphone 'system' is on")], said


def test_the_sound_devices_going_mid_speech_and_coming_back_is_said_once(app):
    # The server crashes while the voice speaks, taking the output and the microphone
    # with it; they come back (with it) two seconds later.
    since = len(app.output.seen)
    app.type(LONG_LINE)
    app.output.until("heard first audio", 20)
    time.sleep(1.0)
    app.server.kill()
    app.output.until(SOUND_OFF, 10)
    time.sleep(2.0)
    app.server.start()
    app.output.until(SOUND_BACK, 15)
    assert speak_and_record(app, "Can you hear me now?") > HEARD
    said_once(app, since)
