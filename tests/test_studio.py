"""The studio behind every front end, driven as the window and headless drive it."""

from __future__ import annotations

import pytest

from app.messages import Severity
from app.settings import Settings, SettingsStore
from app.studio import Studio
from pipeline.core.events import InputStatus


@pytest.fixture
def studio(qt_app, tmp_path):
    s = Studio(SettingsStore(tmp_path / "settings.json"), Settings(mic_enabled=False),
               measure_modes=False)
    yield s
    s.close()


def test_a_microphone_that_is_on_is_good_news_before_the_engine_holds_it(studio):
    """The engine reports a microphone's status before it holds that microphone: the
    news must be read from the event, or 'is on' kept the warning sign."""
    assert studio.engine.mic is None
    studio._on_event(InputStatus("started", "Microphone 'system' is on", "system"))
    on = next(m for m in studio.messages.shown() if m.text == "Microphone 'system' is on")
    assert on.severity is Severity.INFO and on.expires_at is not None
    studio._on_event(InputStatus("lost", "Microphone 'system' was lost", "system"))
    lost = next(m for m in studio.messages.shown() if m.text.endswith("was lost"))
    assert lost.severity is Severity.WARNING


@pytest.fixture
def studio_with_mic(qt_app, jack_server, tmp_path):
    s = Studio(SettingsStore(tmp_path / "settings.json"),
               Settings(mic_enabled=True, mic_device="system"), measure_modes=False)
    assert s.engine.start_mic() is None
    yield s
    s.close()


def test_mute_and_push_to_talk_reach_the_microphone_stage(studio_with_mic):
    studio = studio_with_mic
    stage = studio.engine.mic_stage
    studio.do_action("mic_mute")
    assert stage.muted
    assert any(m.text.startswith("Microphone muted") for m in studio.messages.shown())
    studio.do_action("mic_mute")
    assert not stage.muted
    # With a push-to-talk key in use the mic is shut unless the key is held.
    studio.set_push_to_talk(True)
    assert stage.muted
    studio.do_action("push_to_talk", pressed=True)
    assert not stage.muted
    studio.do_action("push_to_talk", pressed=False)
    assert stage.muted
    # The mic reopened (a setting changed): the new stage is muted the same way.
    studio.apply(Settings(mic_enabled=True, mic_device="system", mic_gate_db=-40.0))
    assert studio.engine.mic_stage is not stage and studio.engine.mic_stage.muted


def test_speaking_an_empty_clipboard_says_so(studio):
    from PySide6.QtGui import QGuiApplication

    QGuiApplication.clipboard().setText("")
    studio.do_action("speak_clipboard")
    assert any(m.text == "The clipboard holds no text to speak." for m in studio.messages.shown())
    QGuiApplication.clipboard().setText("Hello chat")
    studio.do_action("speak_clipboard")  # no voice loaded in this studio
    assert any(m.text.startswith("The voice is still loading") for m in studio.messages.shown())
