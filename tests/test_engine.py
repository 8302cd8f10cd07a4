"""The engine without a window: devices on the real JACK test server."""

import json
import logging
import time
from dataclasses import replace

import pytest

from app.engine import Engine
from app.settings import Settings
from pipeline.audio.devices import (
    SERVER_GONE_MESSAGE,
    list_devices,
    portaudio_released,
    reinitialize_portaudio,
)
from pipeline.core.events import DeviceNotice, InputStatus
from tests.harness.jack_recorder import plug_in_microphone, plug_in_speaker
from tests.harness.services import JackServer, run_in_child

pytestmark = pytest.mark.audio


def mic_messages(engine: Engine) -> list[str]:
    """What the window shows of the microphone: its statuses and the engine's notices
    about it, from the engine's event bus, in order."""
    messages = []
    engine.events.subscribe(
        lambda e: messages.append(e.message)
        if isinstance(e, InputStatus) or e.device == "microphone" else None,
        InputStatus, DeviceNotice)
    return messages

NEW_MIC = "lss-new-mic"
NEW_SPEAKER = "lss-new-speaker"


def test_devices_plugged_in_after_start_are_opened_when_chosen(jack_server):
    settings = Settings(audio_output_device="system", mic_lipsync="volume")
    engine = Engine(settings)
    messages = mic_messages(engine)
    assert engine.start_audio() is None and engine.start_mic() is None
    # Plugged in after PortAudio started, so this process's PortAudio does not list them.
    usb = plug_in_microphone(NEW_MIC)
    speaker = plug_in_speaker(NEW_SPEAKER)
    try:
        assert NEW_MIC not in list_devices("input") and NEW_SPEAKER not in list_devices("output")

        old_clock = engine.clock
        assert engine.apply(replace(settings, mic_device=NEW_MIC)) == []
        assert (engine.mic.device_name, engine.mic.standing_in) == (NEW_MIC, False)
        assert messages == ["Microphone 'system' is on", f"Microphone '{NEW_MIC}' is on"]
        assert engine.mic.read(0.5) is not None
        # PortAudio was re-initialised: the output is reopened, on a new running clock.
        assert engine.output.device_name == "system" and engine.clock is not old_clock
        start = engine.clock.media_time_now()
        time.sleep(0.2)
        assert engine.clock.media_time_now() > start + 0.1

        assert engine.apply(replace(settings, mic_device=NEW_MIC,
                                    audio_output_device=NEW_SPEAKER)) == []
        assert engine.output.device_name == NEW_SPEAKER
        assert speaker.inports[0].connections  # PortAudio's output feeds the new speaker
        assert engine.mic.device_name == NEW_MIC
    finally:
        engine.close()
        usb.stop()
        speaker.close()
        reinitialize_portaudio()  # forget the devices for the tests after this one


def test_choosing_portaudios_own_jack_connection_is_explained_not_silent(jack_server):
    # The settings panel's listing offered "PortAudio": a newly initialised PortAudio
    # sees this process's own JACK client as a device. Chosen, audio went off as "not
    # found", just after the panel had listed it.
    settings = Settings(audio_output_device="system", mic_device="system", mic_lipsync="volume")
    engine = Engine(settings)
    assert engine.start_audio() is None and engine.start_mic() is None
    try:
        assert engine.apply(replace(settings, audio_output_device="PortAudio")) == [
            "Audio is off: 'PortAudio' is not an audio output: it is the JACK connection of a "
            "program that uses PortAudio (Lipsync Studio's own, or another's). Choose one of: "
            "system in Settings."]
        assert engine.output is None and engine.mic.device_name == "system"
    finally:
        engine.close()


def test_after_the_sound_server_restarts_the_engine_reopens_its_devices_and_still_quits():
    # In a child process with a JACK server of its own: PortAudio 19.6's JACK host can
    # neither close a stream whose server died nor be terminated after it (devices.py).
    child, result = run_in_child("tests.test_engine:restart_server_then_quit", timeout=60)
    assert result["news"] == [
        f"Audio is off: {SERVER_GONE_MESSAGE}",
        "Sound is back: the sound server runs again (playing on 'system', the microphone "
        "'system' on)."]
    # The mic's watchdog left it to the engine: no "stopped delivering sound", no retries.
    assert result["mic"] == ["Microphone 'system' is on"] * 2
    assert result["callbacks"] > 0 and result["captured"]
    assert result["close_seconds"] < 5


def restart_server_then_quit() -> None:
    """Prints JSON; the process must then exit by itself."""
    logging.basicConfig()
    server = JackServer()
    reinitialize_portaudio()  # PortAudio enumerated before this server existed
    engine = Engine(Settings(audio_output_device="system", mic_device="system",
                             mic_lipsync="volume"))
    mic = mic_messages(engine)
    engine.start_audio()
    engine.start_mic()
    time.sleep(0.3)
    server.kill()
    news = []

    def follow(until: int) -> None:
        deadline = time.monotonic() + 15
        while len(news) < until and time.monotonic() < deadline:
            said = engine.follow_sound_server()  # as the studio's timer does
            if said is not None:
                news.append(said)
            time.sleep(0.1)

    follow(1)
    server.start()
    follow(2)
    callbacks = engine.output.callbacks
    captured = engine.mic.read(0.5) is not None
    time.sleep(0.2)
    callbacks = engine.output.callbacks - callbacks  # the reopened output plays
    started = time.monotonic()
    engine.close()
    close_seconds = time.monotonic() - started
    with portaudio_released():  # as the test session's server stops
        server.stop()
    print(json.dumps({"news": news, "mic": mic, "callbacks": callbacks,
                      "captured": captured, "close_seconds": close_seconds}))


def test_the_engine_publishes_speech_and_device_news_on_its_bus(jack_server):
    from pipeline.core.events import (
        SentenceTimed,
        SpeechFinished,
        SpeechStarted,
        VisemeTimed,
    )
    from pipeline.voice.streaming_tts import StreamingTTS

    settings = Settings(audio_output_device="lss-no-such-speaker", mic_enabled=False)
    engine = Engine(settings)
    got = []
    engine.events.subscribe(got.append)
    try:
        problem = engine.start_audio()
        assert problem.startswith("Audio is off:")
        assert got == [DeviceNotice("output", problem)]
        assert engine.apply(replace(settings, audio_output_device="system")) == []
        assert got[-1] == DeviceNotice("output", None)  # the condition is over

        engine.attach_voice(StreamingTTS())
        first = engine.say("Papa made a map.")
        second = engine.append("Five big boxes move slowly.")
        deadline = time.monotonic() + 30
        while not any(isinstance(e, SpeechFinished) and e.request == second for e in got):
            assert time.monotonic() < deadline, "the appended speech never finished"
            time.sleep(0.05)
    finally:
        engine.close()
    for request, text in ((first, "Papa made a map."), (second, "Five big boxes move slowly.")):
        mine = [e for e in got if getattr(e, "request", None) == request]
        assert isinstance(mine[0], (SpeechStarted, SentenceTimed))
        assert [e.text for e in mine if isinstance(e, SentenceTimed)] == [text]
        assert sum(isinstance(e, VisemeTimed) for e in mine) > 5
        assert isinstance(mine[-1], SpeechFinished) and not mine[-1].cancelled


def test_the_voice_says_where_its_inference_runs_and_why_not_elsewhere():
    """This machine's onnxruntime has only the CPU provider: asked for CUDA by name, the
    voice runs on the CPU and the line says why (a warning); on "auto" the same line, but
    settling for the CPU is no warning."""
    import onnxruntime

    from app.engine import Engine
    from pipeline.voice.streaming_tts import StreamingTTS

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime has a CUDA provider: the CPU fallback is not what runs")
    text, warn = Engine.inference_text(StreamingTTS(provider="cuda"))
    assert warn and text.startswith("The voice runs on CPU (asked for: cuda;")
    assert "no CUDA provider" in text
    text, warn = Engine.inference_text(StreamingTTS(provider="auto"))
    assert not warn and text.startswith("The voice runs on CPU (asked for: auto;")
    tts = StreamingTTS(provider="cpu")
    assert Engine.inference_text(tts) == ("The voice runs on CPU.", False)
    # Where the mouth frames are made follows (render/gpu/path_picker.py's summary).
    mouth = "mouth frames by OpenGL, as the settings ask"
    assert Engine.inference_text(tts, mouth) == (f"The voice runs on CPU; {mouth}.", False)
