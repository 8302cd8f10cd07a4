"""Hotkeys: an action per key combination, heard while another application has focus where
the desktop allows it, and only while our window has focus where it does not.

The combinations are pynput's strings ("<ctrl>+<alt>+s"), as settings.hotkeys keeps them.
`parse` reads one without pynput, whose import needs a display: the settings editor and the
window's own shortcuts read them on any desktop. `Hotkeys` listens through pynput (the X
RECORD extension on X11, a low-level hook on Windows and macOS) and tells the caller's
thread each action through the `call_soon` it was given. On Wayland no client may see keys
meant for another, so there `Hotkeys` says so and the window installs
`install_window_shortcuts` instead. (The XDG desktop portal's GlobalShortcuts, where the
desktop binds the keys and tells the app over D-Bus, is the way to global ones there; it is
not used yet: no portal that implements it runs where the tests run, so it could not be
tried.)

What is refused is told as a `Problem` naming the action and the keys: a string that is not
a combination, two actions on one combination (neither is bound: which one the user meant
is theirs to say), and, on X11, a combination another program has reserved (X refuses our
XGrabKey with BadAccess): that one stays bound, since RECORD hears it anyway, and the user
is told that pressing it does both.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QKeyCombination, QObject, Qt, QTimer
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QApplication, QWidget

EXPRESSION_PREFIX = "expression:"
# Actions told both when their combination goes down and when it comes up again; every
# other action is told once, when it goes down.
HOLD_ACTIONS = frozenset({"push_to_talk"})

_ACTION_LABELS = {
    "stop": "Stop speaking",
    "mic_mute": "Mute or unmute the microphone",
    "push_to_talk": "Push to talk",
    "speak_clipboard": "Speak the clipboard",
    "next_avatar": "Next avatar",
    "previous_avatar": "Previous avatar",
    "toggle_avatar": "Show or hide the avatar",
}

# pynput's modifier names, in the order a combination is written and shown, with what
# Qt calls each (Qt's Meta is the Super/Windows key on X11 and Windows, Command on macOS).
_MODIFIERS = {"ctrl": "Ctrl", "alt": "Alt", "shift": "Shift", "cmd": "Meta", "alt_gr": "AltGr"}
_MODIFIER_LABELS = {"ctrl": "Ctrl", "alt": "Alt", "shift": "Shift", "cmd": "Super",
                    "alt_gr": "AltGr"}
# pynput's names of the keys that are not characters (its Key enum, less the modifiers and
# their left/right forms, which pynput's own matching folds into the plain modifier), with
# Qt's portable name of each.
_NAMED_KEYS = {
    "space": "Space", "enter": "Return", "tab": "Tab", "esc": "Esc", "backspace": "Backspace",
    "delete": "Del", "insert": "Ins", "home": "Home", "end": "End", "page_up": "PgUp",
    "page_down": "PgDown", "up": "Up", "down": "Down", "left": "Left", "right": "Right",
    "caps_lock": "CapsLock", "num_lock": "NumLock", "scroll_lock": "ScrollLock",
    "pause": "Pause", "print_screen": "Print", "menu": "Menu",
    "media_play_pause": "Media Play", "media_next": "Media Next",
    "media_previous": "Media Previous", "media_volume_up": "Volume Up",
    "media_volume_down": "Volume Down", "media_volume_mute": "Volume Mute",
    **{f"f{n}": f"F{n}" for n in range(1, 21)},
}
_KEY_LABELS = {"page_up": "Page Up", "page_down": "Page Down", "esc": "Esc",
               "print_screen": "Print Screen", "caps_lock": "Caps Lock",
               "num_lock": "Num Lock", "scroll_lock": "Scroll Lock",
               "media_play_pause": "Play/Pause", "media_next": "Next Track",
               "media_previous": "Previous Track", "media_volume_up": "Volume Up",
               "media_volume_down": "Volume Down", "media_volume_mute": "Mute"}

WAYLAND_MESSAGE = (
    "Hotkeys work only while the Lipsync Studio window has focus: this is a Wayland "
    "session, where no program may see keys pressed in another. For hotkeys that work in "
    "a game, log in to an X11 (Xorg) session, or bind a key in your desktop's own shortcut "
    "settings to a command that drives the app through its API.")
MACOS_UNTRUSTED_MESSAGE = (
    "Hotkeys are not heard yet: macOS lets an app watch the keyboard only once allowed. "
    "Allow Lipsync Studio in System Settings → Privacy & Security → Accessibility, then "
    "restart it.")
NO_RECORD_MESSAGE = (
    "Hotkeys are off: this X server has no RECORD extension, through which they are "
    "heard (Xorg has it unless xorg.conf turns it off).")
NO_DISPLAY_MESSAGE = (
    "Hotkeys are off: there is no desktop session to listen in (neither DISPLAY nor "
    "WAYLAND_DISPLAY is set).")


def action_label(action: str) -> str:
    """The action as the user reads it: "Stop speaking", "Expression: happy"."""
    if action.startswith(EXPRESSION_PREFIX):
        return f"Expression: {action[len(EXPRESSION_PREFIX):]}"
    return _ACTION_LABELS.get(action, action)


class ComboError(ValueError):
    """A string that is not a combination; its text says why, in the user's words."""


@dataclass(frozen=True)
class Combination:
    """Modifiers and one key: `key` is a lower-case character or a name of `_NAMED_KEYS`.

    Two combinations are equal exactly when the same keys make them, so a written form's
    case, order and spacing do not matter."""

    modifiers: frozenset[str]
    key: str

    def text(self) -> str:
        """pynput's form, modifiers in one order: "<ctrl>+<alt>+s"."""
        key = f"<{self.key}>" if self.key in _NAMED_KEYS else self.key
        return "+".join([f"<{m}>" for m in _MODIFIERS if m in self.modifiers] + [key])

    def label(self) -> str:
        """The form people read: "Ctrl+Alt+S"."""
        held = [modifiers_label(self.modifiers)] if self.modifiers else []
        return "+".join(held + [self.key_label()])

    def key_label(self) -> str:
        """The key without its modifiers, as people read it: "S", "Page Up"."""
        return _KEY_LABELS.get(self.key) or (
            _upper(self.key) if self.key not in _NAMED_KEYS else self.key.capitalize())

    def qt_sequence(self) -> QKeySequence:
        flags = Qt.KeyboardModifier.NoModifier
        for name in self.modifiers:
            flags |= _QT_MODIFIERS[name]
        # A character's Qt key is its upper-case code point, as from_qt reads it back.
        key = _QT_KEY_OF[self.key] if self.key in _NAMED_KEYS else ord(_upper(self.key))
        return QKeySequence(QKeyCombination(flags, Qt.Key(key)))

    @classmethod
    def from_qt(cls, key: int, modifiers: Qt.KeyboardModifier) -> Combination | None:
        """The combination of a Qt key event, or None while only modifiers are down (or for
        a key pynput has no name for)."""
        mods = modifiers_from_qt(modifiers)
        if key in _QT_KEYS:
            return cls(mods, _QT_KEYS[key])
        if 0x20 < key < 0x01000000:  # a character: Qt's key is its upper-case code point
            return cls(mods, chr(key).lower())
        return None


def modifiers_from_qt(modifiers: Qt.KeyboardModifier) -> frozenset[str]:
    """pynput's names of the modifiers a Qt event has down."""
    return frozenset(name for name, flag in _QT_MODIFIERS.items() if modifiers & flag)


def modifiers_label(modifiers: frozenset[str]) -> str:
    """Modifiers as people read them, in the usual order: "Ctrl+Alt"."""
    return "+".join(_MODIFIER_LABELS[m] for m in _MODIFIERS if m in modifiers)


def _upper(char: str) -> str:
    """The upper case of a character where it is one character (ß's is "SS": ß stays)."""
    upper = char.upper()
    return upper if len(upper) == 1 else char


_QT_MODIFIERS = {"ctrl": Qt.KeyboardModifier.ControlModifier,
                 "alt": Qt.KeyboardModifier.AltModifier,
                 "shift": Qt.KeyboardModifier.ShiftModifier,
                 "cmd": Qt.KeyboardModifier.MetaModifier,
                 "alt_gr": Qt.KeyboardModifier.GroupSwitchModifier}
_QT_KEY_OF = {name: QKeySequence(qt)[0].key().value for name, qt in _NAMED_KEYS.items()}
_QT_KEYS = {code: name for name, code in _QT_KEY_OF.items()}


def parse(text: str) -> Combination:
    """One combination in pynput's form; ComboError says what is wrong with it.

    Parts are joined by '+' (a '+' that starts a part is the plus key, as in pynput); a part
    is one character or a key's name in angle brackets."""
    parts, start = [], 0
    for i, c in enumerate(text):
        if c == "+" and i != start:
            parts.append(text[start:i])
            start = i + 1
    if start == len(text):
        raise ComboError(f"'{text}' ends with '+': a key is missing after it")
    parts.append(text[start:])
    modifiers: set[str] = set()
    keys: list[str] = []
    for part in parts:
        if len(part) > 2 and part[0] == "<" and part[-1] == ">":
            name = part[1:-1].lower()
            if name in _MODIFIERS:
                if name in modifiers:
                    raise ComboError(f"'{text}' has {_MODIFIER_LABELS[name]} twice")
                modifiers.add(name)
            elif name in _NAMED_KEYS:
                keys.append(name)
            else:
                raise ComboError(f"'{text}': {part} is not a key this app knows (keys are "
                                 "written like <ctrl>, <alt>, <shift>, <cmd>, <f1>, <space>)")
        elif len(part) == 1 and part.isprintable() and not part.isspace():
            keys.append(part.lower())
        else:
            raise ComboError(f"'{text}': '{part}' is not one key (a key is one character, "
                             "or a name in angle brackets like <f1>)")
    if len(keys) != 1:
        raise ComboError(f"'{text}' has {'no key' if not keys else f'{len(keys)} keys'} "
                         "besides the modifiers: a hotkey is modifiers and one key")
    return Combination(frozenset(modifiers), keys[0])


@dataclass(frozen=True)
class Problem:
    """Why some actions' hotkeys do not work, or work other than set. `bound`: whether
    they are bound all the same."""

    actions: tuple[str, ...]  # the actions it is about; () for all of them
    text: str
    bound: bool = False


def check(bindings: Mapping[str, str], base: Mapping[str, str] | None = None,
          ) -> tuple[dict[Combination, str], list[Problem]]:
    """What can be bound (combination → action) and what cannot: a string that is not a
    combination, or one combination set for two or more actions. `base` maps a character
    typed with Shift to the one its key types without ("!" → "1" on a US layout; the
    keyboard map's, `_x_base_chars`), so that Ctrl+Shift+1 and Ctrl+Shift+! are one
    combination, as they are one set of keys; without it, characters are taken as written."""
    by_combo: dict[Combination, list[str]] = {}
    problems = []
    for action, text in bindings.items():
        if not text:
            continue
        try:
            combo = parse(text)
            if base:
                combo = Combination(combo.modifiers, base.get(combo.key, combo.key))
            by_combo.setdefault(combo, []).append(action)
        except ComboError as e:
            problems.append(Problem((action,), f"{action_label(action)}: {e}"))
    bound = {}
    for combo, actions in by_combo.items():
        if len(actions) == 1:
            bound[combo] = actions[0]
        else:
            names = " and ".join(action_label(a) for a in actions)
            problems.append(Problem(tuple(actions), (
                f"{combo.label()} is set for both {names}: neither works until one of "
                "them has another combination")))
    return bound, problems


def desktop(environ: Mapping[str, str] = os.environ) -> str:
    """Where keys can be heard: "x11", "wayland", "native" (Windows, macOS) or "none".

    A Wayland session often has an X server for older programs (Xwayland, DISPLAY set),
    but it sees only the keys typed into those programs' windows, so the session's type
    decides before DISPLAY does."""
    if sys.platform in ("win32", "darwin"):
        return "native"
    if environ.get("XDG_SESSION_TYPE") == "wayland":
        return "wayland"
    if environ.get("DISPLAY"):
        return "x11"
    if environ.get("WAYLAND_DISPLAY"):
        return "wayland"
    return "none"


# python-xlib comes with pynput on Linux alone: imported where X is the desktop.
def _x_has_record() -> bool:
    import Xlib.display

    display = Xlib.display.Display()
    try:
        return display.has_extension("RECORD")
    finally:
        display.close()


def _keysym_char(keysym: int) -> str | None:
    """The character of a keysym: its code point in Latin-1, 0x1000000 above it beyond
    (the X protocol's rule); None for keysyms of no character."""
    if 0x20 < keysym < 0x100 and keysym != 0x7f:
        return chr(keysym)
    if 0x1000000 < keysym < 0x1110000:
        return chr(keysym - 0x1000000)
    return None


def _x_base_chars() -> dict[str, str]:
    """Each character typed with Shift on this keyboard map → the one its key types
    without (lower case, as pynput's canonical keys are)."""
    import Xlib.display

    display = Xlib.display.Display()
    try:
        first = display.display.info.min_keycode
        count = display.display.info.max_keycode - first + 1
        base = {}
        for keysyms in display.get_keyboard_mapping(first, count):
            plain, shifted = (_keysym_char(k) for k in (list(keysyms) + [0, 0])[:2])
            if plain and shifted and shifted.lower() != plain.lower():
                base.setdefault(shifted.lower(), plain.lower())
        return base
    finally:
        display.close()


def _x_end_recording(listener) -> None:
    """End the listener's RECORD context from a connection of our own. pynput 1.8 ends it
    on the connection that is busy receiving the recorded events, where the server does
    not act on it until another key comes (its stop then returned only after the next key
    press, here one test in two); the fix, sending it on another connection, is pynput's
    open pull request 583."""
    import Xlib.display

    context = getattr(listener, "_context", None)
    if context is None:
        return
    display = Xlib.display.Display()
    try:
        display.record_disable_context(context)
        display.sync()
    finally:
        display.close()


# The X modifier keys whose modifier bit stands for each of ours (ctrl and shift have
# fixed bits; the others are wherever the keyboard map puts these keys).
_X_MODIFIER_KEYSYMS = {"alt": "Alt_L", "cmd": "Super_L", "alt_gr": "ISO_Level3_Shift"}


def _x_reserved_elsewhere(bound: Mapping[Combination, str], keyboard) -> list[Problem]:
    """What X says of each combination: one that another program has reserved (our
    XGrabKey fails with BadAccess; ours is let go at once, since RECORD hears the keys
    without it) still works but also does the other program's action; one with no key on
    this keyboard map cannot be pressed at all."""
    import Xlib.display
    import Xlib.error
    import Xlib.X
    import Xlib.XK

    display = Xlib.display.Display()
    try:
        root = display.screen().root
        bits = {"ctrl": Xlib.X.ControlMask, "shift": Xlib.X.ShiftMask}
        for index, keycodes in enumerate(display.get_modifier_mapping()):
            for name, keysym in _X_MODIFIER_KEYSYMS.items():
                code = display.keysym_to_keycode(Xlib.XK.string_to_keysym(keysym))
                if code and code in keycodes:
                    bits.setdefault(name, 1 << index)
        problems = []
        for combo, action in bound.items():
            # A character's keysym: _keysym_char's rule backwards; a named key's is
            # pynput's vk on X.
            keysym = (keyboard.Key[combo.key].value.vk if combo.key in _NAMED_KEYS
                      else ord(combo.key) if ord(combo.key) < 0x100
                      else 0x1000000 + ord(combo.key))
            keycode = display.keysym_to_keycode(keysym)
            missing = [_MODIFIER_LABELS[m] for m in combo.modifiers if m not in bits]
            if not keycode or missing:
                what = ", ".join(missing) if missing else combo.key_label()
                problems.append(Problem((action,), (
                    f"{action_label(action)}: {combo.label()} cannot be pressed on this "
                    f"keyboard (its layout has no {what} key)")))
                continue
            mask = 0
            for m in combo.modifiers:
                mask |= bits[m]
            refused = Xlib.error.CatchError(Xlib.error.BadAccess)
            root.grab_key(keycode, mask, True, Xlib.X.GrabModeAsync, Xlib.X.GrabModeAsync,
                          onerror=refused)
            display.sync()
            if refused.get_error():
                problems.append(Problem((action,), (
                    f"{action_label(action)}: {combo.label()} is also a shortcut of another "
                    "program, which acts on it too: choose another combination"), bound=True))
            else:
                root.ungrab_key(keycode, mask)
        display.sync()
        return problems
    finally:
        display.close()


Dispatch = Callable[[str, bool], None]
# How long stop waits for pynput's thread to end; stop took 10-52 ms under Xvfb on the
# 2-core VM (the latter while it was busy installing packages). A thread that outlives the
# wait is a daemon, and tells nothing.
STOP_WAIT_S = 2.0


@dataclass(frozen=True)
class _Binding:
    action: str
    modifiers: frozenset  # pynput's Key of each modifier, as its `canonical` gives them
    key: object  # pynput's KeyCode, as its `canonical` gives it


class Hotkeys:
    """The hotkeys of one settings map, heard globally.

    `dispatch(action, pressed)` runs only on the caller's thread, through `call_soon`, never
    on pynput's: pressed=True when the combination goes down (once, however long it is held:
    X repeats a held key as presses without releases, measured under Xvfb), and, for
    HOLD_ACTIONS alone, pressed=False when any of its keys comes up. A combination is heard
    only with exactly its modifiers down (Ctrl+Alt+S is not Ctrl+Alt+Shift+S); other keys
    held meanwhile (walking in a game) do not matter.

    `problems` is what the latest start or reconfigure refused or warned about; `is_global`
    says whether keys are heard in other applications (False: the window should install
    `install_window_shortcuts`); while `paused`, no combination goes down (one held already
    is still told its release)."""

    def __init__(self, bindings: Mapping[str, str], dispatch: Dispatch,
                 call_soon: Callable[[Callable[[], None]], None], *,
                 environ: Mapping[str, str] = os.environ) -> None:
        self._bindings = dict(bindings)
        self._dispatch = dispatch
        self._call_soon = call_soon
        self._environ = environ
        self._listener = None
        # Swapped whole by reconfigure, read whole by pynput's thread: no lock needed.
        self._table: tuple[_Binding, ...] = ()
        self._down: set = set()  # pynput's thread only
        self._active: set[_Binding] = set()  # pynput's thread only
        self.problems: list[Problem] = []
        self._standing: list[Problem] = []  # the listening's own, from start
        self._base: dict[str, str] = {}  # see check
        self.is_global = False
        # While the user sets a combination in the settings (HotkeyEditor.capturing), the
        # keys pressed there are not the actions they are bound to.
        self.paused = False

    def start(self) -> list[Problem]:
        """Listen; the problems (also kept in `problems`)."""
        if self._listener is not None:
            return self.reconfigure(self._bindings)
        self._standing = self._listen()
        return self.reconfigure(self._bindings)

    def _listen(self) -> list[Problem]:
        """Start pynput's listener where the desktop allows; why it does not, or does not
        hear yet: what holds for every hotkey until the next start."""
        kind = desktop(self._environ)
        if kind in ("wayland", "none"):
            return [Problem((), WAYLAND_MESSAGE if kind == "wayland" else NO_DISPLAY_MESSAGE)]
        try:
            from pynput import keyboard
        except ImportError:  # pynput connects to the display as it is imported
            return [Problem((), (
                f"Hotkeys are off: the X display {self._environ.get('DISPLAY')} cannot be "
                "reached." if kind == "x11" else
                "Hotkeys are off: this system does not let the app listen to the keyboard."))]
        if kind == "x11" and not _x_has_record():
            return [Problem((), NO_RECORD_MESSAGE)]
        self._keyboard = keyboard
        self._listener = keyboard.Listener(on_press=self._on_press, on_release=self._on_release)
        self._listener.start()
        self._listener.wait()
        self.is_global = True
        if getattr(self._listener, "IS_TRUSTED", True) is False:
            # macOS: pynput's listener runs but hears nothing until the user allows it.
            return [Problem((), MACOS_UNTRUSTED_MESSAGE)]
        return []

    def reconfigure(self, bindings: Mapping[str, str]) -> list[Problem]:
        """Hear `bindings` from now on, in place of the ones before (a combination held
        down meanwhile is told its release as before); the problems, as for start."""
        self._bindings = dict(bindings)
        on_x = self._listener is not None and desktop(self._environ) == "x11"
        # pynput tells a key by the character it types, Shift applied (Ctrl+Shift+1 comes
        # as "!"): both sides are taken to the key's own character.
        self._base = _x_base_chars() if on_x else {}
        bound, problems = check(self._bindings, self._base)
        problems = self._standing + problems
        if on_x:
            x_problems = _x_reserved_elsewhere(bound, self._keyboard)
            problems += x_problems
            for problem in x_problems:
                if not problem.bound:
                    bound = {c: a for c, a in bound.items() if a not in problem.actions}
        if self._listener is not None:
            self._table = tuple(self._binding(combo, action) for combo, action in bound.items())
        self.problems = problems
        return problems

    def stop(self) -> None:
        """Stop listening: no key pressed after this returns is told."""
        listener, self._listener = self._listener, None
        self._table = ()
        self._standing = []
        if listener is not None:
            listener.stop()
            if desktop(self._environ) == "x11":
                _x_end_recording(listener)
            listener.join(STOP_WAIT_S)
        self.is_global = False

    def _binding(self, combo: Combination, action: str) -> _Binding:
        keys = self._keyboard.HotKey.parse(combo.text())
        mods = frozenset(k for k in keys if isinstance(k, self._keyboard.Key))
        (key,) = [k for k in keys if not isinstance(k, self._keyboard.Key)]
        return _Binding(action, mods, key)

    def _on_press(self, key, injected: bool) -> None:
        # Injected: sent by a program as a synthetic event (pynput's own Controller, or
        # XSendEvent), not typed; pynput's GlobalHotKeys ignores them the same way.
        listener = threading.current_thread()
        if key is None or injected or listener is not self._listener:
            return  # a stopped listener's thread, until it ends, tells nothing
        key = self._base_key(listener.canonical(key))
        if key in self._down:
            return  # the key's auto-repeat
        self._down.add(key)
        if self.paused:
            return
        held = frozenset(k for k in self._down if isinstance(k, self._keyboard.Key))
        for binding in self._table:
            if binding.key == key and binding.modifiers == held:
                self._active.add(binding)
                self._tell(binding.action, True)

    def _on_release(self, key, injected: bool) -> None:
        listener = threading.current_thread()
        if key is None or injected or listener is not self._listener:
            return
        key = self._base_key(listener.canonical(key))
        self._down.discard(key)
        for binding in [b for b in self._active if key == b.key or key in b.modifiers]:
            self._active.discard(binding)
            if binding.action in HOLD_ACTIONS:
                self._tell(binding.action, False)

    def _base_key(self, key):
        char = getattr(key, "char", None)
        if char is not None and char in self._base:
            return self._keyboard.KeyCode.from_char(self._base[char])
        return key

    def _tell(self, action: str, pressed: bool) -> None:
        self._call_soon(lambda: self._dispatch(action, pressed))


# X repeats a held key as a release and a press with one timestamp; Qt marks the pair as a
# repeat only when the press is already queued as it reads the release, and under load it
# was not (push to talk told released and pressed again 2-6 times in one 1.2-s hold, in 3
# runs of 5 of the test file on the 2-core VM). So a release is told once this long has
# passed without the key going down again: the pair's press comes with its release, and
# the next repeat would be 40 ms later (X's 25 repeats a second), so a press later than
# this is a new one.
RELEASE_GRACE_MS = 50


class WindowShortcuts(QObject):
    """The hotkeys as shortcuts of one window, heard only while it has focus: what works
    where global hotkeys cannot (Wayland). `dispatch(action, pressed)` runs on the GUI
    thread, with the same meaning as for `Hotkeys`; a HOLD_ACTIONS combination's release
    is seen by an application-wide event filter, since the key's release goes to whichever
    widget has focus and a QShortcut tells only presses, and is told RELEASE_GRACE_MS
    after it, unless the key was a repeat.

    `remove()` takes them all off the window again."""

    def __init__(self, window: QWidget, bindings: Mapping[str, str], dispatch: Dispatch) -> None:
        super().__init__(window)
        self._dispatch = dispatch
        bound, self.problems = check(bindings)
        self._shortcuts = []
        self._held: dict[int, str] = {}  # Qt key → hold action, while it is down
        self._releasing: dict[int, QTimer] = {}  # held keys let go, within the grace
        hold_keys = False
        for combo, action in bound.items():
            sequence = combo.qt_sequence()
            shortcut = QShortcut(sequence, window)
            shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
            shortcut.setAutoRepeat(False)
            shortcut.activated.connect(lambda action=action, key=sequence[0].key().value:
                                       self._pressed(action, key))
            self._shortcuts.append(shortcut)
            hold_keys |= action in HOLD_ACTIONS
        if hold_keys:
            QApplication.instance().installEventFilter(self)

    def _pressed(self, action: str, key: int) -> None:
        if action in HOLD_ACTIONS:
            timer = self._releasing.pop(key, None)
            if timer is not None:
                timer.stop()  # the release was the key's repeat: still held
            if key in self._held:
                return
            self._held[key] = action
        self._dispatch(action, True)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (event.type() == QEvent.Type.KeyRelease and not event.isAutoRepeat()
                and event.key() in self._held and event.key() not in self._releasing):
            key = event.key()
            timer = QTimer(self)
            timer.setSingleShot(True)
            timer.timeout.connect(lambda: self._released(key))
            timer.start(RELEASE_GRACE_MS)
            self._releasing[key] = timer
        return False

    def _released(self, key: int) -> None:
        self._releasing.pop(key).deleteLater()
        self._dispatch(self._held.pop(key), False)

    def remove(self) -> None:
        QApplication.instance().removeEventFilter(self)
        for shortcut in self._shortcuts:
            shortcut.setParent(None)
            shortcut.deleteLater()
        self._shortcuts = []
        for timer in self._releasing.values():
            timer.stop()
        self._releasing.clear()
        self._held.clear()
        self.setParent(None)


def install_window_shortcuts(window: QWidget, bindings: Mapping[str, str],
                             dispatch: Dispatch) -> WindowShortcuts:
    """Install `bindings` as shortcuts of `window` (see WindowShortcuts); its `problems`
    are the combinations it refused."""
    return WindowShortcuts(window, bindings, dispatch)

