"""ObsPusher: the running app's live values into OBS (the mic's sync offset when the
measured delay moves, caption text as the words come), from a thread of its own.

Invariants: `offer_*` never blocks and never raises; it runs on the event bus's
publishing threads (the speaker's, the mic's), which must return at once. Only the newest
value of each kind waits to be sent: one superseded before its turn is dropped, so a slow
or absent OBS (the link retrying for up to its reconnect_within_s) never builds a backlog.
A failure is told to ``on_error`` once, in one line, until a send succeeds again, and so
is a connection that drops (OBS quit or crashed) as soon as the link sees it, while the
link reconnects; the values it could not send are tried again RETRY_S later, or at the
next offer. The first send that succeeds after either is told to ``on_back``, once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from app.obs.connection import ObsError
from app.obs.link import ObsLink

# Values OBS did not take wait this long for the next try: one refused connection every
# 5 s costs nothing while OBS is closed, and OBS is seldom started sooner after a failure.
RETRY_S = 5.0


class ObsPusher:
    def __init__(self, link: ObsLink, on_error: Callable[[str], None] = lambda message: None,
                 on_back: Callable[[str], None] = lambda message: None) -> None:
        self.link = link
        self.on_error = on_error
        self.on_back = on_back
        link.connection.on_lost = self._lost
        self._pending: dict[str, tuple] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="obs-pusher", daemon=True)
        self._thread.start()

    def offer_sync_offset(self, offset_ms: float, latency_mode: str = "") -> None:
        """The mic → mouth delay moved (a DelayChange, a latency mode switch)."""
        self._offer("offset", (offset_ms, latency_mode))

    def offer_caption(self, source_name: str, text: str) -> None:
        """The caption to show now in OBS's text source ``source_name``."""
        self._offer("caption", (source_name, text))

    def close(self, timeout: float = 2.0) -> None:
        """Stop after the send in progress (not the values still waiting); close the link."""
        self._closed = True
        self._wake.set()
        self._thread.join(timeout)
        self.link.close()

    def _offer(self, kind: str, value: tuple) -> None:
        with self._lock:
            self._pending[kind] = value
        self._wake.set()

    def _run(self) -> None:
        retry_in = None  # seconds until values that failed are tried again; None: none wait
        while True:
            self._wake.wait(retry_in)
            if self._closed:
                return
            with self._lock:
                self._wake.clear()
                pending, self._pending = self._pending, {}
            if not pending:
                retry_in = None
                continue
            try:
                if "offset" in pending:
                    self.link.set_mic_sync_offset(*pending["offset"])
                if "caption" in pending:
                    self.link.set_caption_text(*pending["caption"])
            except ObsError as exc:
                if not self._failing:
                    self.on_error(f"OBS: {exc}")
                self._failing = True
                with self._lock:
                    for kind, value in pending.items():
                        self._pending.setdefault(kind, value)  # a newer offer wins
                retry_in = RETRY_S
            else:
                if self._failing:
                    self.on_back(f"OBS: connected again at {self.link.connection.where}; the "
                                 "captions and the mic's sync offset reach it again.")
                self._failing = False
                retry_in = None

    def _lost(self) -> None:
        """On this thread, inside a send: the link reconnects now, for a while."""
        if not self._failing:
            self.on_error(f"OBS: the connection to OBS at {self.link.connection.where} was lost "
                          "(did it quit?); reconnecting, the captions and the mic's sync offset "
                          "wait until it is back.")
        self._failing = True
