"""What the app tells the user, without Qt: the messages that are true now, and every
message since start for the history view.

A message is either about a condition (it has a key: "audio", "mic", ...) or about an
event. A condition's message stays until the app says otherwise: a new message under
the same key replaces it ("Microphone is back" replaces "Microphone stopped delivering
sound"), and clear(key) ends it when the condition ends. An event's message ("Nothing to
speak") is a reply to what just happened: it expires once it has had time to be read.
Either kind may be given its own lifetime (good news about a condition, say).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

# Long enough to read a long message (~50 words) at a slow 150 words per minute, and
# then some: nothing is lost when it goes, the history keeps it.
EVENT_SECONDS = 25.0


class Severity(enum.Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class Ended(enum.Enum):
    REPLACED = "replaced"
    CLEARED = "cleared"
    EXPIRED = "expired"


@dataclass(eq=False)
class Message:
    text: str
    severity: Severity
    key: Hashable | None
    posted_at: float  # wall-clock time, to be shown
    # On the board's monotonic clock; None: until replaced or cleared.
    expires_at: float | None
    ended_at: float | None = None  # wall-clock time
    ended: Ended | None = None


class MessageBoard:
    """The messages shown now (`shown()`) and all of them (`history()`).

    Two clocks: expiry runs on a monotonic one, so that a wall-clock jump (NTP, resume
    from suspend) neither keeps a message for hours nor drops it at once; the times shown
    to the user come from the wall clock."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time,
                 event_seconds: float = EVENT_SECONDS) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self.event_seconds = event_seconds
        self._history: list[Message] = []
        self._shown: list[Message] = []
        # Bumped on every change, so a view redraws only when there is something new.
        self.version = 0

    def post(self, text: str, severity: Severity = Severity.WARNING, *,
             key: Hashable | None = None, seconds: float | None = None) -> Message:
        """Show `text`. With a `key` it is about a condition and replaces that condition's
        message, and stays until replaced or cleared unless `seconds` is given; without
        one it is an event and goes after `seconds` (default: EVENT_SECONDS). A condition
        reported again in the same words is the same message, with the severity and
        lifetime of the latest report; an event that happens again is a new message,
        replacing its copy."""
        if seconds is None and key is None:
            seconds = self.event_seconds
        expires_at = None if seconds is None else self._clock() + seconds
        same = next((m for m in self._shown if key is not None and m.key == key
                     and m.text == text), None)
        if same is not None:
            if same.severity != severity:
                same.severity = severity
                self.version += 1
            same.expires_at = expires_at
            return same
        for old in [m for m in self._shown if (key is not None and m.key == key)
                    or (key is None and m.key is None and m.text == text)]:
            self._end(old, Ended.REPLACED)
        message = Message(text, severity, key, self._wall_clock(), expires_at)
        self._history.append(message)
        self._shown.append(message)
        self.version += 1
        return message

    def clear(self, key: Hashable) -> bool:
        """The condition `key` is over: its message goes. True if one was shown."""
        message = next((m for m in self._shown if m.key == key), None)
        if message is None:
            return False
        self._end(message, Ended.CLEARED)
        return True

    def expire(self) -> bool:
        """Let the messages whose time is up go. True if any went."""
        now = self._clock()
        due = [m for m in self._shown if m.expires_at is not None and m.expires_at <= now]
        for message in due:
            self._end(message, Ended.EXPIRED)
        return bool(due)

    def shown(self) -> list[Message]:
        """The messages true now, newest first."""
        return self._shown[::-1]

    def history(self) -> list[Message]:
        """Every message since start, oldest first, with when and why each one went."""
        return list(self._history)

    def _end(self, message: Message, why: Ended) -> None:
        message.ended = why
        message.ended_at = self._wall_clock()
        self._shown.remove(message)
        self.version += 1
