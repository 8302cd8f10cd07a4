"""The engine's event bus: every stage publishes what happened as a typed record, and
anyone (the window, the command line, later the API) subscribes to the kinds it wants.

Qt-free and thread-agnostic: ``publish`` calls each matching subscriber on the
publishing thread, in the order they subscribed. The stages publish from their worker
threads (the speaker's, the microphone's watchdog), never from an audio callback, so a
subscriber must return quickly and hand anything slow to a thread of its own (a Qt
window posts to its own thread through a signal).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

log = logging.getLogger(__name__)

Handler = Callable[[Any], None]


@dataclass(frozen=True, slots=True)
class DeviceNotice:
    """Something the user must know about a device that is not a microphone status of
    its own (pipeline.audio.input.InputStatus): audio turned off, a model that fell back,
    a sound server that cannot be restarted. ``message`` is meant for the user; None
    says the condition is over."""

    device: Literal["output", "microphone"]
    message: str | None


class EventBus:
    """Invariant: ``publish`` takes no lock and never sees a half-changed subscriber
    list: subscribing replaces the whole tuple (one reference swap), so a publisher reads
    either the old tuple or the new one."""

    def __init__(self) -> None:
        self._subscribers: tuple[tuple[Handler, tuple[type, ...]], ...] = ()
        self._changing = threading.Lock()  # between subscribers only, never publish

    def subscribe(self, handler: Handler, *kinds: type) -> Callable[[], None]:
        """Call ``handler(event)`` for every event that is an instance of one of
        ``kinds`` (every event if none is given). Returns the unsubscribe call."""
        entry = (handler, kinds)
        with self._changing:
            self._subscribers = (*self._subscribers, entry)

        def unsubscribe() -> None:
            with self._changing:
                self._subscribers = tuple(s for s in self._subscribers if s is not entry)

        return unsubscribe

    def publish(self, event: object) -> None:
        """Hand ``event`` to its subscribers. One that raises is logged and the rest still
        get the event: a broken listener must not stop speech or the microphone."""
        for handler, kinds in self._subscribers:
            if kinds and not isinstance(event, kinds):
                continue
            try:
                handler(event)
            except Exception:
                log.exception("a subscriber to %s failed", type(event).__name__)
