"""The settings panel's "Add to OBS" (app/ui/obs_setup_box.py) against a real OBS 29 on the
test display (tests/harness/obs.py), in the real settings panel at its default size:
what it did can be read whole, and a problem is told with the window's remedy."""

from __future__ import annotations

import pytest

from app.settings import Settings

# Settings, records and the OBS password in a folder of each test's, no system keyring.
pytestmark = [pytest.mark.display, pytest.mark.usefixtures("obs_config")]


@pytest.fixture
def panel(qt_app, obs):
    from app.ui.settings_panel import SettingsPanel
    from tests.harness.app_driver import pump_until

    shown = SettingsPanel(lambda: Settings(obs_port=obs.port))
    shown.show()  # at the size it opens at: nobody resized it
    pump_until(lambda: shown.isVisible(), 10, "the settings panel shown")
    shown.tabs.setCurrentIndex(next(i for i in range(shown.tabs.count())
                                    if shown.tabs.tabText(i) == "Outputs (OBS)"))
    yield shown
    shown.close()
    shown.deleteLater()


def _add(panel, password: str) -> str:
    from tests.harness.app_driver import pump, pump_until

    box = panel.obs_setup
    box.password.setText(password)
    box.add()
    pump_until(lambda: box.succeeded is not None, 60, "Add to OBS")
    pump(0.1)  # the result laid out
    return box.result.toPlainText()


def _in_view(panel) -> None:
    """Every line of the result can be read in the panel as it opened: the result lies
    whole inside the tab's visible area once the tab is scrolled to it, and its own
    scrolling reaches its first and its last line."""
    from PySide6.QtGui import QTextCursor

    from tests.harness.app_driver import pump

    result = panel.obs_setup.result
    area = panel.tabs.currentWidget()
    pump(0.1)  # the tab laid out again with the result shown
    # The tab can be scrolled to a place where the whole result is in view.
    top = result.mapTo(area.widget(), result.rect().topLeft()).y()
    viewport = area.viewport().height()
    assert result.height() <= viewport, "the result is taller than the panel shows"
    assert top + result.height() <= area.verticalScrollBar().maximum() + viewport, \
        "the result is cut off below the tab's end"
    assert result.isVisible() and result.height() >= result.fontMetrics().lineSpacing() * 3
    for end in (QTextCursor.MoveOperation.Start, QTextCursor.MoveOperation.End):
        result.moveCursor(end)
        result.ensureCursorVisible()
        pump(0.05)
        assert result.viewport().rect().contains(result.cursorRect()), f"{end} is out of view"


def test_a_refused_password_says_which_field_to_fill(panel, obs):
    text = _add(panel, "wrong")
    assert not panel.obs_setup.succeeded
    assert text.splitlines()[-1] == (
        f"Not added: OBS at 127.0.0.1:{obs.port} refused the password: type the right one in the "
        "password field beside Add to OBS, then press Add to OBS again; OBS shows it under Tools → "
        "WebSocket Server Settings → Show Connect Info")
    assert "--password" not in text, "command-line advice in the window"
    # The problem, the last line, is in view without scrolling the result.
    result = panel.obs_setup.result
    end = result.textCursor()
    end.movePosition(end.MoveOperation.End)
    assert result.viewport().rect().contains(result.cursorRect(end)), "the problem is out of view"
    _in_view(panel)


def test_a_missing_password_says_where_to_type_it(panel, obs):
    text = _add(panel, "")
    assert text.splitlines()[-1].startswith(
        f"Not added: OBS at 127.0.0.1:{obs.port} asks for a password: type it in the password "
        "field beside Add to OBS, then press Add to OBS again;")


def test_what_a_setup_did_is_read_whole(panel, obs):
    text = _add(panel, obs.password)
    assert panel.obs_setup.succeeded, text
    # No app and no avatar window in this test: setup says so among its other lines.
    lines = text.splitlines()
    assert lines[0] == "Lipsync Studio is not running: setting OBS up from the saved settings"
    assert len(lines) >= 5 and "the microphone's sync offset is not changed" in lines[-1]
    _in_view(panel)
