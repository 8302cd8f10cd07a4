"""Drives the real main window from a test or benchmark: no mocks, a real event loop."""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QEventLoop
from PySide6.QtWidgets import QApplication

from app.settings import Settings, SettingsStore

# Settings with no idle motion of any kind (blinks, breathing, sway): the app's idle
# frames are then all alike, for tests that compare them.
STILL = dict(blinking=False, breathing=False, motion_bounce=0.0, motion_tilt=0.0,
             motion_shake=0.0, motion_sway=0.0, motion_head_turn=0.0)
# The JACK test server's device, named in every window's settings: the machine's default
# is its own sound card or sound server wherever it has one (conftest's harness_device
# checks it is the server's).
HARNESS_DEVICE = "system"
# The mic has its own tests; in the app's it would only add load and nothing to look at.
# At 60 fps on Xvfb's software GL too, so that A/V sync is checked on the finer frame grid.
QUIET = Settings(audio_output_device=HARNESS_DEVICE, mic_enabled=False, software_gl_fps=60,
                 **STILL)


def pump(seconds: float) -> None:
    """Run the Qt event loop for `seconds` (timers, signals, repaints all happen)."""
    app = QApplication.instance()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 5)
        time.sleep(0.001)


def pump_until(condition, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError(f"{what} did not happen within {timeout} s")
        pump(0.02)


def open_window(config_dir: Path, settings: Settings | None = None, size=(640, 760)):
    """The app's main window with its own settings folder, shown and with the voice loaded."""
    from app.ui.main_window import MainWindow

    store = SettingsStore(config_dir / "settings.json")
    if settings is not None:
        store.save(settings)
    window = MainWindow(store, store.load())
    window.resize(*size)
    window.show()
    pump_until(window.engine.voice_ready_for_speech, 60, "loading the voice")
    return window


def say(window, text: str, timeout: float = 10) -> None:
    """Type `text`, press Speak, and return once its first audio is scheduled."""
    window.first_audio = None
    window.finished = None
    window.text.setText(text)
    window.speak()
    pump_until(lambda: window.first_audio is not None, timeout, "speech start")


def wait_until_quiet(window, margin: float = 0.0, timeout: float = 30) -> None:
    """Wait until the request has been synthesized and all of it heard (plus `margin`)."""
    engine = window.engine
    pump_until(lambda: window.finished is not None
               and window.finished.end_media_time + margin < engine.clock.media_time_now(),
               timeout, "the end of the speech")
