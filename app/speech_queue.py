"""What is to be said, in turn: the speech queue behind the text box, the hotkeys and the
API's speak requests.

Two ways to take a new line (Settings.speech_queue, or per request): "interrupt" cuts
what is being said and says the new line at once (and drops what was waiting); "queue"
says it after everything before it, as a donation or chat reader does. Each entry is
spoken as a request of its own; the next starts when the one before has finished (or
failed, or was skipped). `skip` cuts the current entry and goes on; `remove` takes a
waiting one out; `clear` empties the queue and silences the voice.

Qt-free: the owner feeds it the speaker's finished and failed events (on its own
thread), and `changed` is told after every change, for a view of the queue.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

INTERRUPT, QUEUE = "interrupt", "queue"
MODES = (INTERRUPT, QUEUE)


@dataclass(frozen=True, slots=True)
class QueuedSpeech:
    id: int  # the queue's own number for the entry (stable while it waits)
    text: str
    source: str  # who asked: "window", "api", "hotkey"…


class SpeechQueue:
    """`speak(text)` starts a request (its id, or None if the voice cannot speak yet);
    `stop()` silences the voice."""

    def __init__(self, speak: Callable[[str], int | None], stop: Callable[[], None]) -> None:
        self._speak = speak
        self._stop = stop
        self._ids = itertools.count(1)
        self.waiting: list[QueuedSpeech] = []
        self.current: QueuedSpeech | None = None
        self._request: int | None = None  # the speaker's id of the current entry
        self.changed: Callable[[], None] | None = None

    def add(self, text: str, mode: str, source: str = "window") -> QueuedSpeech | None:
        """Take a line; the entry (None when the voice could not take it: not loaded)."""
        if mode not in MODES:
            raise ValueError(f"{mode!r} is not one of {MODES}")
        entry = QueuedSpeech(next(self._ids), text, source)
        if mode == INTERRUPT or self.current is None:
            self.waiting = [] if mode == INTERRUPT else self.waiting
            if not self._start(entry):
                self._notify()
                return None
        else:
            self.waiting.append(entry)
        self._notify()
        return entry

    @property
    def request(self) -> int | None:
        """The speaker's request id of what is being said now."""
        return self._request

    def skip(self) -> None:
        """Cut the current entry; the next one starts once the voice has stopped."""
        if self.current is not None:
            self._stop()  # its SpeechFinished (cancelled) starts the next

    def remove(self, entry_id: int) -> bool:
        before = len(self.waiting)
        self.waiting = [e for e in self.waiting if e.id != entry_id]
        if len(self.waiting) != before:
            self._notify()
            return True
        return False

    def clear(self) -> None:
        """Nothing more to say: the queue emptied and the voice silenced."""
        self.waiting = []
        self.current, self._request = None, None
        self._stop()
        self._notify()

    def finished(self, request: int) -> None:
        """The speaker is done with `request` (finished, cancelled or failed)."""
        if request != self._request:
            return
        self.current, self._request = None, None
        while self.waiting:
            if self._start(self.waiting.pop(0)):
                break
        self._notify()

    def _start(self, entry: QueuedSpeech) -> bool:
        request = self._speak(entry.text)
        if request is None:
            return False
        self.current, self._request = entry, request
        return True

    def _notify(self) -> None:
        if self.changed is not None:
            self.changed()
