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
