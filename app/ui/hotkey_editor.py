"""The settings' hotkeys: each action with a field that takes the keys pressed in it, a
button to clear it, and what is wrong with its combination said under it.

Its contract is the settings panel's (SettingsPanel.add_section, the HOTKEYS tab): it shows
`current()`'s settings, emits `changed(settings)` with whole new settings on each edit, and
`show_settings` shows settings changed elsewhere. The expression actions listed are the
current avatar's (`show_expressions`); the hotkeys of other avatars' expressions are kept
as they are. A combination refused is still saved (the user may be halfway through moving
it from one action to another) and its problem stays under the row until it is resolved;
`show_problems` adds what only the running hotkeys know (another program's shortcut, a
Wayland session).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QGridLayout, QLabel, QLineEdit, QPushButton, QWidget

from app.hotkeys import (
    EXPRESSION_PREFIX,
    Combination,
    ComboError,
    Problem,
    action_label,
    check,
    modifiers_from_qt,
    modifiers_label,
    parse,
)
from app.settings import HOTKEY_ACTIONS, Settings, validate

PROBLEM_STYLE = "color: #c0392b"
NO_KEY = "None: click here and press the keys"

_MODIFIER_KEYS = {Qt.Key.Key_Control, Qt.Key.Key_Alt, Qt.Key.Key_Shift, Qt.Key.Key_Meta,
                  Qt.Key.Key_AltGr, Qt.Key.Key_Super_L, Qt.Key.Key_Super_R}
_NO_MODIFIER = Qt.KeyboardModifier.NoModifier
# Qt marks keypad keys with a modifier of their own; the combination is the same key.
_IGNORED_MODIFIERS = Qt.KeyboardModifier.KeypadModifier


def _shown(text: str) -> str:
    """A combination as the field shows it: as people read it, or as written when it is
    no combination (its problem is said under it)."""
    if not text:
        return ""
    try:
        return parse(text).label()
    except ComboError:
        return text


class KeyCaptureField(QLineEdit):
    """Shows one action's combination; pressing keys in it sets a new one. While modifiers
    alone are down it shows them ("Ctrl+Alt+…"); Backspace or Delete alone clears it; Tab
    moves on as anywhere else. It takes keys before any shortcut of the window does, so a
    combination already bound can be set again (or moved) here."""

    captured = Signal(str)  # the new combination in pynput's form, "" for none
    focused = Signal(bool)  # it has the keyboard focus: keys pressed are for it

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setPlaceholderText(NO_KEY)
        self.show_combination(text)

    def show_combination(self, text: str) -> None:
        self._text = text
        self.setText(_shown(text))

    def focusInEvent(self, event) -> None:
        super().focusInEvent(event)
        self.focused.emit(True)

    def focusOutEvent(self, event) -> None:
        super().focusOutEvent(event)
        self.focused.emit(False)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ShortcutOverride:
            event.accept()  # the keys come here as key presses, not to a shortcut
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        modifiers = event.modifiers() & ~_IGNORED_MODIFIERS
        if key in (Qt.Key.Key_Tab, Qt.Key.Key_Backtab) and modifiers in (
                _NO_MODIFIER, Qt.KeyboardModifier.ShiftModifier):
            super().keyPressEvent(event)
            return
        event.accept()
        if key in (Qt.Key.Key_Backspace, Qt.Key.Key_Delete) and modifiers == _NO_MODIFIER:
            self.show_combination("")
            self.captured.emit("")
            return
        if key in _MODIFIER_KEYS:
            held = modifiers_from_qt(modifiers)
            self.setText(modifiers_label(held) + "+…" if held else _shown(self._text))
            return
        combo = Combination.from_qt(key, modifiers)
        if combo is None:
            self.setText(_shown(self._text))
            return
        self.show_combination(combo.text())
        self.captured.emit(combo.text())

    def keyReleaseEvent(self, event: QKeyEvent) -> None:
        if not (event.modifiers() & ~_IGNORED_MODIFIERS):
            self.setText(_shown(self._text))  # modifiers let go without a key: as before
        event.accept()


class HotkeyEditor(QWidget):
    """Invariant: each field shows the shown settings' combination for its action, and each
    problem label says what `check` (and the latest `show_problems`) found for that action,
    hidden when nothing."""

    changed = Signal(object)
    # A field has the keyboard focus (True) or none has (False): the global hotkeys should
    # pause meanwhile (Hotkeys.paused), or setting Ctrl+Alt+S anew would also stop speaking.
    capturing = Signal(bool)

    def __init__(self, current: Callable[[], Settings], expressions: Sequence[str] = (),
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._current = current
        self._hotkeys = dict(current().hotkeys)
        self._layout = QGridLayout(self)
        self._layout.setColumnStretch(1, 1)
        self._general = QLabel()  # problems that concern every hotkey (a Wayland session)
        self._general.setStyleSheet(PROBLEM_STYLE)
        self._general.setWordWrap(True)
        self._general.setTextFormat(Qt.TextFormat.PlainText)
        self._general.hide()
        self._layout.addWidget(self._general, 0, 0, 1, 3)
        self.fields: dict[str, KeyCaptureField] = {}
        self.problem_labels: dict[str, QLabel] = {}
        self._rows: list[QWidget] = []
        self._live: list[Problem] = []
        self._capturing = False
        self._expressions: tuple[str, ...] = ()
        self.show_expressions(expressions)

    def bindings(self) -> dict[str, str]:
        """Every action's combination: the settings' map with this editor's edits."""
        return dict(self._hotkeys)

    def show_expressions(self, names: Iterable[str]) -> None:
        """List the hotkeys of these expressions (the current avatar's) after the actions."""
        self._expressions = tuple(names)
        for widget in self._rows:
            self._layout.removeWidget(widget)
            widget.deleteLater()
        self._rows, self.fields, self.problem_labels = [], {}, {}
        hotkeys = self.bindings()
        actions = list(HOTKEY_ACTIONS) + [EXPRESSION_PREFIX + n for n in self._expressions]
        for i, action in enumerate(actions):
            row = 1 + 2 * i
            label = QLabel(action_label(action))
            field = KeyCaptureField(hotkeys.get(action, ""))
            label.setBuddy(field)
            field.captured.connect(lambda text, action=action: self._edited(action, text))
            field.focused.connect(self._focus_moved)
            clear = QPushButton("Clear")
            clear.setToolTip(f"No hotkey for {action_label(action)}")
            clear.clicked.connect(lambda _=False, action=action: self._clear(action))
            problem = QLabel()
            problem.setStyleSheet(PROBLEM_STYLE)
            problem.setWordWrap(True)
            problem.setTextFormat(Qt.TextFormat.PlainText)
            problem.hide()
            self._layout.addWidget(label, row, 0)
            self._layout.addWidget(field, row, 1)
            self._layout.addWidget(clear, row, 2)
            self._layout.addWidget(problem, row + 1, 1, 1, 2)
            self._rows += [label, field, clear, problem]
            self.fields[action] = field
            self.problem_labels[action] = problem
        self._show_problems()

    def show_settings(self, settings: Settings) -> None:
        self._hotkeys = dict(settings.hotkeys)
        for action, field in self.fields.items():
            field.show_combination(self._hotkeys.get(action, ""))
        self._show_problems()

    def show_problems(self, problems: Sequence[Problem]) -> None:
        """Show what the running hotkeys found besides `check` (kept until the next call)."""
        self._live = list(problems)
        self._show_problems()

    def _focus_moved(self, into: bool) -> None:
        if into:
            self._follow_focus()
        else:  # focus going from one field to the next: the next has it once Qt is done
            QTimer.singleShot(0, self._follow_focus)

    def _follow_focus(self) -> None:
        now = any(field.hasFocus() for field in self.fields.values())
        if now != self._capturing:
            self._capturing = now
            self.capturing.emit(now)

    def _clear(self, action: str) -> None:
        self.fields[action].show_combination("")
        self._edited(action, "")

    def _edited(self, action: str, text: str) -> None:
        self._hotkeys[action] = text
        self._show_problems()
        settings, _ = validate({**asdict(self._current()), "hotkeys": dict(self._hotkeys)})
        self.changed.emit(settings)

    def _show_problems(self) -> None:
        _, problems = check(self._hotkeys)
        said = {p.text for p in problems}
        problems += [p for p in self._live if p.text not in said]
        general = [p.text for p in problems if not p.actions]
        self._general.setText("\n".join(general))
        self._general.setVisible(bool(general))
        for action, label in self.problem_labels.items():
            texts = [p.text for p in problems if action in p.actions]
            label.setText("\n".join(texts))
            label.setVisible(bool(texts))
