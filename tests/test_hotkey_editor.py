"""The settings' hotkey editor (app/ui/hotkey_editor.py), set by real X key and mouse
events (xdotool) in its window on the test display, as a user sets it."""

from __future__ import annotations

import subprocess
import time

import pytest

from app.hotkeys import WAYLAND_MESSAGE, Problem
from app.settings import DEFAULT_HOTKEYS, Settings
from app.ui.hotkey_editor import NO_KEY, HotkeyEditor

pytestmark = pytest.mark.display

# Qt reads X's events as they come: 0.3 s of event processing after xdotool returns is
# more than enough (a key reached a Qt field within one 10-ms pass here).
SETTLE_S = 0.3


def xdotool(*args: str) -> None:
    subprocess.run(["xdotool", *args], check=True, timeout=10)


@pytest.fixture
def editor(qt_app, window_manager):
    shown = {"settings": Settings()}
    editor = HotkeyEditor(lambda: shown["settings"], ["happy", "sad"])
    editor.emitted = []

    def take(settings):
        editor.emitted.append(settings)
        shown["settings"] = settings

    editor.changed.connect(take)
    editor.setWindowTitle("Hotkeys (test)")
    editor.show()
    settle(qt_app)
    xdotool("windowactivate", "--sync", str(int(editor.winId())))
    settle(qt_app)
    yield editor
    editor.close()
    settle(qt_app)


def settle(qt_app, seconds: float = SETTLE_S) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        qt_app.processEvents()
        time.sleep(0.01)


def press_in(qt_app, editor, action: str, *keys: str) -> None:
    editor.fields[action].setFocus()
    settle(qt_app)
    xdotool("key", *keys)
    settle(qt_app)


def test_lists_every_action_and_the_avatars_expressions(editor):
    labels = [editor.layout().itemAtPosition(1 + 2 * i, 0).widget().text()
              for i in range(len(editor.fields))]
    assert labels == ["Stop speaking", "Mute or unmute the microphone", "Push to talk",
                      "Speak the clipboard", "Next avatar", "Previous avatar",
                      "Show or hide the avatar", "Expression: happy", "Expression: sad"]
    assert editor.fields["stop"].text() == "Ctrl+Alt+S"
    assert editor.fields["push_to_talk"].text() == ""
    assert editor.fields["push_to_talk"].placeholderText() == NO_KEY
    assert not any(label.isVisible() for label in editor.problem_labels.values())


def test_pressing_keys_sets_the_combination(qt_app, editor):
    press_in(qt_app, editor, "stop", "ctrl+alt+k")
    assert editor.fields["stop"].text() == "Ctrl+Alt+K"
    assert editor.emitted[-1].hotkeys["stop"] == "<ctrl>+<alt>+k"
    press_in(qt_app, editor, "push_to_talk", "F9")
    assert editor.emitted[-1].hotkeys["push_to_talk"] == "<f9>"
    assert editor.fields["push_to_talk"].text() == "F9"
    # The other avatars' expressions keep their keys, though not listed.
    assert editor.bindings()["expression:neutral"] == DEFAULT_HOTKEYS["expression:neutral"]
    assert len(editor.emitted) == 2


def test_a_conflict_is_shown_under_both_rows_until_resolved(qt_app, editor):
    press_in(qt_app, editor, "mic_mute", "ctrl+alt+s")  # Stop speaking's
    said = ("Ctrl+Alt+S is set for both Stop speaking and Mute or unmute the microphone: "
            "neither works until one of them has another combination")
    for action in ("stop", "mic_mute"):
        assert editor.problem_labels[action].isVisible()
        assert editor.problem_labels[action].text() == said
    assert not editor.problem_labels["next_avatar"].isVisible()
    assert editor.emitted[-1].hotkeys["mic_mute"] == "<ctrl>+<alt>+s", "saved all the same"
    press_in(qt_app, editor, "mic_mute", "BackSpace")
    assert editor.fields["mic_mute"].text() == ""
    assert editor.emitted[-1].hotkeys["mic_mute"] == ""
    assert not editor.problem_labels["stop"].isVisible()


def test_the_clear_button_removes_the_combination(qt_app, editor):
    row = list(editor.fields).index("expression:happy")
    button = editor.layout().itemAtPosition(1 + 2 * row, 2).widget()
    centre = button.mapToGlobal(button.rect().center())
    xdotool("mousemove", "--sync", str(centre.x()), str(centre.y()), "click", "1")
    settle(qt_app)
    assert editor.fields["expression:happy"].text() == ""
    assert editor.emitted[-1].hotkeys["expression:happy"] == ""


def test_modifiers_alone_set_nothing(qt_app, editor):
    editor.fields["stop"].setFocus()
    settle(qt_app)
    xdotool("keydown", "ctrl+alt")
    settle(qt_app)
    assert editor.fields["stop"].text() == "Ctrl+Alt+…"
    xdotool("keyup", "ctrl+alt")
    settle(qt_app)
    assert editor.fields["stop"].text() == "Ctrl+Alt+S"
    assert editor.emitted == []


def test_the_running_hotkeys_problems_are_shown(qt_app, editor):
    editor.show_problems([
        Problem((), WAYLAND_MESSAGE),
        Problem(("next_avatar",), "Next avatar: Ctrl+Alt+N is also a shortcut of another "
                "program, which acts on it too: choose another combination", bound=True)])
    assert editor.problem_labels["next_avatar"].isVisible()
    general = editor.layout().itemAtPosition(0, 0).widget()
    assert general.isVisible() and general.text() == WAYLAND_MESSAGE
    editor.show_problems([])
    assert not editor.problem_labels["next_avatar"].isVisible() and not general.isVisible()


def test_settings_changed_elsewhere_are_shown(qt_app, editor):
    editor.show_settings(Settings(hotkeys={"stop": "<shift>+<f2>"}))
    assert editor.fields["stop"].text() == "Shift+F2"
    assert editor.fields["mic_mute"].text() == ""


def test_a_bound_combination_is_taken_by_the_field_not_its_shortcut(qt_app, editor):
    """Where hotkeys are the window's own shortcuts (Wayland), pressing one in a field sets
    it there rather than doing its action."""
    from app.hotkeys import install_window_shortcuts

    heard = []
    shortcuts = install_window_shortcuts(editor, {"stop": "<ctrl>+<alt>+s"},
                                         lambda action, pressed: heard.append(action))
    try:
        press_in(qt_app, editor, "mic_mute", "ctrl+alt+s")
        assert editor.emitted[-1].hotkeys["mic_mute"] == "<ctrl>+<alt>+s"
        assert heard == []
        editor.fields["stop"].clearFocus()
        editor.setFocus()
        settle(qt_app)
        xdotool("key", "ctrl+alt+s")
        settle(qt_app)
        assert heard == ["stop"], "outside the fields the shortcut works"
    finally:
        shortcuts.remove()


def test_the_global_hotkeys_pause_while_a_field_takes_keys(qt_app, editor):
    """Setting Ctrl+Alt+S anew must not also stop speaking: the editor says when a field
    has the keys, and the running Hotkeys, paused, tells nothing meanwhile."""
    from app.hotkeys import Hotkeys

    told = []
    hotkeys = Hotkeys({"stop": "<ctrl>+<alt>+s"}, lambda action, pressed: told.append(action),
                      lambda call: call())  # told on pynput's thread: the list is enough here
    for field in editor.fields.values():  # as the panel opens: no field has the keys yet
        field.clearFocus()
    settle(qt_app)
    capturing = []
    editor.capturing.connect(capturing.append)
    editor.capturing.connect(lambda on: setattr(hotkeys, "paused", on))
    assert hotkeys.start() == []
    try:
        press_in(qt_app, editor, "stop", "ctrl+alt+d")
        press_in(qt_app, editor, "mic_mute", "ctrl+alt+s")  # focus moved field to field
        assert capturing == [True] and told == []
        assert editor.emitted[-1].hotkeys["mic_mute"] == "<ctrl>+<alt>+s"
        editor.fields["mic_mute"].clearFocus()
        settle(qt_app)
        assert capturing == [True, False]
        xdotool("key", "ctrl+alt+s")
        settle(qt_app)
        assert told == ["stop"], "heard again once no field has the keys"
    finally:
        hotkeys.stop()
