"""The speech queue (app/speech_queue.py) in the real window with the real voice on the
JACK test server: lines read in turn, skip, remove and clear, interrupt as before; and
the text box that clears after Enter and gives earlier lines back with Up and Down."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.settings import Settings
from pipeline.core.events import SentenceTimed, SpeechFinished
from tests.harness.app_driver import open_window, pump, pump_until

pytestmark = [pytest.mark.display, pytest.mark.audio]

LINES = ["First comes the hello.", "Then the thank you.", "And last the goodbye."]


@pytest.fixture
def window(qt_app, jack_server, tmp_path):
    w = open_window(tmp_path, Settings(audio_output_device="system", mic_enabled=False,
                                       speech_queue="queue", blinking=False, breathing=False))
    heard: list[str] = []
    w.engine.events.subscribe(lambda e: heard.append(e.text), SentenceTimed)
    w.heard = heard
    yield w
    w.close()


def _type(window, text: str) -> None:
    window.text.setFocus()
    window.text.setText(text)
    QTest.keyClick(window.text, Qt.Key.Key_Return)


def test_queued_lines_are_read_in_turn_and_the_queue_is_shown(window):
    pump(0.2)
    # Where lines wait their turn the queue stays on screen, so the avatar above it keeps
    # its size as lines come and go (it shrank 507 → 399 px at each first line: a stall).
    assert window.queue_view.isVisible()
    assert window.queue_view.now.text() == "Nothing waiting: new lines are read in turn."
    avatar = window.view.size()
    for line in LINES:
        _type(window, line)
    assert window.text.text() == ""  # Enter took each line and cleared the box
    queue = window.studio.queue
    assert [e.text for e in queue.waiting] == LINES[1:] and queue.current.text == LINES[0]
    assert window.queue_view.isVisible() and window.queue_view.list.count() == 2
    pump(0.2)
    assert window.view.size() == avatar
    pump_until(lambda: len(window.heard) == 3 and queue.current is None, 30,
               "the three lines read in turn")
    pump(0.2)
    assert window.heard == LINES
    assert window.queue_view.list.count() == 0 and window.view.size() == avatar
    assert not window.queue_view.clear_button.isEnabled()


def test_skip_remove_and_clear(window):
    for line in LINES:
        _type(window, line)
    queue = window.studio.queue
    window.queue_view.list.setCurrentRow(1)  # "And last the goodbye."
    window.queue_view.remove_button.click()
    assert [e.text for e in queue.waiting] == [LINES[1]]
    pump_until(lambda: window.heard == LINES[:1], 10, "the first line started")
    window.queue_view.skip_button.click()  # cut the first: the second follows at once
    pump_until(lambda: window.heard == LINES[:2], 10, "the second line after the skip")
    _type(window, "One more for the queue.")
    window.queue_view.clear_button.click()
    assert queue.waiting == [] and queue.current is None
    finished: list[SpeechFinished] = []
    window.engine.events.subscribe(finished.append, SpeechFinished)
    pump(1.5)
    assert window.heard == LINES[:2]  # nothing after the clear
    assert window.engine.speaker.idle


def test_interrupt_cuts_what_is_said_and_drops_what_waits(window):
    window.apply_settings(replace(window.settings, speech_queue="interrupt"))
    _type(window, "A long line about many things that takes a while to say out loud.")
    pump_until(lambda: len(window.heard) == 1, 10, "the first line started")
    _type(window, LINES[2])
    pump_until(lambda: len(window.heard) == 2, 10, "the interruption")
    assert window.heard[1] == LINES[2] and window.studio.queue.waiting == []
    assert not window.queue_view.isVisible()  # nothing ever waits: no room taken


def test_up_and_down_bring_back_earlier_lines(window):
    window.apply_settings(replace(window.settings, speech_queue="interrupt"))
    for line in LINES[:2]:
        _type(window, line)
    window.text.setText("half typed")
    QTest.keyClick(window.text, Qt.Key.Key_Up)
    assert window.text.text() == LINES[1]
    QTest.keyClick(window.text, Qt.Key.Key_Up)
    assert window.text.text() == LINES[0]
    QTest.keyClick(window.text, Qt.Key.Key_Up)  # the oldest stays
    assert window.text.text() == LINES[0]
    QTest.keyClick(window.text, Qt.Key.Key_Down)
    QTest.keyClick(window.text, Qt.Key.Key_Down)
    assert window.text.text() == "half typed"  # back to what was being typed
    window.studio.stop()
