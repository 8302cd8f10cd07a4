"""The main window's layout as a user sees it: the real window under Xvfb (1280×720, as
the test display is), at its default size and at a narrow width, judged by measured
geometry and by screenshots (each saved beside the test's files)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.settings import Settings, SettingsStore
from tests.harness.app_driver import pump, pump_until

pytestmark = [pytest.mark.display, pytest.mark.audio]

# The JACK test server's devices; the mic on, as a streamer has it, so the status line
# carries the mic's figures too (its longest form).
SETTINGS = Settings(audio_output_device="system", mic_device="system", blinking=False,
                    breathing=False)
NARROW = 480


def _open(store: SettingsStore):
    from app.ui.main_window import MainWindow

    window = MainWindow(store, store.load())
    window.show()
    pump_until(window.engine.voice_ready_for_speech, 60, "loading the voice")
    pump_until(lambda: window.engine.mic_stage is not None, 10, "the microphone opening")
    pump(0.6)  # a status refresh (every 0.5 s) with the mic's figures
    return window


@pytest.fixture(scope="module")
def store(tmp_path_factory, jack_server, window_manager):
    store = SettingsStore(tmp_path_factory.mktemp("layout") / "settings.json")
    store.save(SETTINGS)
    return store


@pytest.fixture(scope="module")
def window(qt_app, store):
    w = _open(store)
    yield w
    if w.isVisible():
        w.close()


def _rect_in(widget, window):
    from PySide6.QtCore import QRect

    return QRect(widget.mapTo(window, widget.rect().topLeft()), widget.size())


def _controls(window):
    return [window.text, window.speak_button, window.stop_button, window.settings_button,
            window.import_button, window.avatar_window_button, window.mic_level,
            window.history_button, window.message_area, window.status]


def _assert_nothing_clipped(window, shot_path):
    from app.ui.mic_meter import WIDEST

    window.grab().save(str(shot_path))
    for widget in _controls(window):
        rect = _rect_in(widget, window)
        assert widget.isVisible() and window.rect().contains(rect), (
            f"{widget.objectName() or type(widget).__name__} at {rect} is outside the "
            f"window {window.rect()}")
        parent = widget.parentWidget()
        while parent is not None and parent is not window:  # no layout box cuts it either
            inside = parent.rect().contains(_rect_in(widget, parent))
            assert inside, f"{type(widget).__name__} is cut off by {type(parent).__name__}"
            parent = parent.parentWidget()
    for button in (window.speak_button, window.stop_button, window.settings_button,
                   window.import_button, window.avatar_window_button, window.history_button):
        assert button.fontMetrics().horizontalAdvance(button.text()) < button.width(), (
            f"{button.text()!r} does not fit its button ({button.width()} px)")
    # The meter's figure in a label of its own, where it fits, never drawn over the bar
    # (a style draws a bar's text in two colours where the level crosses it).
    meter = window.mic_level
    assert not meter.bar.isTextVisible() and meter.label.text().startswith("mic ")
    assert meter.label.fontMetrics().horizontalAdvance(meter.label.text()) <= (
        meter.label.contentsRect().width()), f"{meter.label.text()!r} does not fit"
    assert meter.label.fontMetrics().horizontalAdvance(WIDEST) <= meter.label.contentsRect().width()
    # Every line of the status is inside its label, and the label inside the window.
    status = window.status
    assert status.text().count("·") >= 5, status.text()  # the mic's figures are there
    assert status.height() >= status.heightForWidth(status.width()), (
        f"the status needs {status.heightForWidth(status.width())} px, has {status.height()}")
    assert _rect_in(status, window).bottom() < window.height()


def test_at_its_default_size_the_text_box_is_the_widest_and_nothing_is_cut(window, tmp_path):
    from app.ui.window_place import DEFAULT_SIZE

    screen = window.screen().availableGeometry()
    assert window.width() == DEFAULT_SIZE[0]
    # The test display is 720 px tall: the window is made to fit it, not 820 px tall.
    assert screen.contains(window.frameGeometry()), (window.frameGeometry(), screen)
    _assert_nothing_clipped(window, tmp_path / "window_720.png")
    others = [w.width() for w in (window.speak_button, window.stop_button,
                                  window.settings_button, window.import_button,
                                  window.avatar_window_button, window.mic_level.label)]
    # Before: 113 px in one row with six buttons and the meter of 80-115 px. Now wider
    # than any button or figure by far (the meter's bar takes what its row leaves).
    assert window.text.width() > 2 * max(others), (window.text.width(), others)
    # A sentence of 50 characters (what a chat line is, often) is seen whole as typed.
    sentence = "Thanks for the follow, welcome to the stream, Sam!"
    assert window.text.fontMetrics().horizontalAdvance(sentence) < window.text.width()


def test_at_a_narrow_width_the_text_box_stays_usable(window, tmp_path):
    window.resize(NARROW, window.height())
    pump(0.3)
    assert window.width() == NARROW
    _assert_nothing_clipped(window, tmp_path / f"window_{NARROW}.png")
    row = [window.speak_button, window.stop_button]
    assert window.text.width() > sum(w.width() for w in row), window.text.width()
    assert window.text.width() >= NARROW / 2


def test_the_microphone_on_is_good_news_without_a_warning_sign(window):
    from app.messages import Severity
    from app.ui.message_view import MARKS

    label = next(label for message, label in window.message_area.labels.items()
                 if message.text == "Microphone 'system' is on")
    assert label.text().startswith(MARKS[Severity.INFO]) and MARKS[Severity.WARNING] not in label.text()


def _grab_rgb(window) -> np.ndarray:
    image = window.view.grab()
    image = image.convertToFormat(image.Format.Format_RGBA8888)
    array = np.frombuffer(image.constBits(), np.uint8).reshape(
        image.height(), image.bytesPerLine() // 4, 4)
    return array[:, : image.width()]


def test_hidden_controls_leave_the_avatar_filling_the_window(window, store):
    from PySide6.QtCore import QEvent, Qt

    window.resize(640, 640)
    pump(0.2)
    from PySide6.QtTest import QTest

    from app.ui.avatar_only import SHORTCUT

    # Its shortcut, as real key events to the focused window (the window manager gives
    # the focus); the View menu holds the same action.
    window.activateWindow()
    pump_until(lambda: window.isActiveWindow(), 5, "the window taking the focus")
    assert window.avatar_only.action in window.menuBar().actions()[0].menu().actions()
    QTest.keySequence(window, SHORTCUT)
    pump(0.3)
    try:
        assert window.controls.isHidden() and window.menuBar().isHidden()
        assert _rect_in(window.view, window) == window.rect()
        frame = _grab_rgb(window)
        assert frame.shape[:2] == (window.height(), window.width())
        assert store.load().window_controls_hidden  # kept for the next start
        assert "Esc" in window.windowTitle()  # the way back is said
    finally:
        from PySide6.QtGui import QKeyEvent
        from PySide6.QtWidgets import QApplication

        QApplication.sendEvent(window, QKeyEvent(QEvent.Type.KeyPress, Qt.Key.Key_Escape,
                                                 Qt.KeyboardModifier.NoModifier))
        pump(0.2)
    assert window.controls.isVisible() and window.menuBar().isVisible()
    assert not store.load().window_controls_hidden
    # A double click on the avatar brings them back too (a real mouse event on the view).
    window.avatar_only.action.trigger()
    pump(0.2)
    assert window.controls.isHidden()
    QTest.mouseDClick(window.view, Qt.MouseButton.LeftButton)
    pump(0.2)
    assert window.controls.isVisible() and window.windowTitle() == "Lipsync Studio"


def test_size_place_and_hidden_controls_survive_a_restart(window, store, qt_app):
    window.resize(560, 600)
    window.move(37, 21)
    window.avatar_only.action.setChecked(True)
    pump(0.3)
    geometry = window.geometry()
    window.close()
    pump(0.2)
    again = _open(store)
    try:
        assert again.geometry() == geometry
        assert again.controls.isHidden()
        assert _rect_in(again.view, again) == again.rect()
    finally:
        again.avatar_only.action.setChecked(False)
        again.close()
        pump(0.2)
    assert replace(store.load(), window_geometry=None) == replace(SETTINGS, window_geometry=None)


def test_the_status_line_is_there_as_the_window_is_made(qt_app, jack_server, tmp_path):
    # Blank until its first refresh (0.5 s on), the line then wrapped and moved the avatar
    # once; the speech queue's layout test measured the blank line when the voice was
    # ready sooner than that.
    from app.ui.main_window import MainWindow

    store = SettingsStore(tmp_path / "settings.json")
    store.save(SETTINGS)
    window = MainWindow(store, store.load())
    try:
        assert window.status.text().startswith("heard first audio – · A/V offset – · frames ")
        assert window.status.height() >= window.status.fontMetrics().lineSpacing()
    finally:
        window.close()
