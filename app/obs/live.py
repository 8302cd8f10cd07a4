"""What the running app keeps telling OBS and `obs setup`: the running-app record (so
`lipsync-studio obs setup` from a terminal configures OBS for this very app: its window,
background, page and measured mic delay) and, once the user has added the avatar to OBS
(or asked for captions there), the live values through ObsPusher: the mic's sync offset
whenever the measured delay moves or the latency mode changes, and the caption text.

Nothing here blocks the caller: the record is a small file written on the GUI thread at
start and on changes, and the pusher sends from its own thread.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from app.engine import Engine
from app.obs.credentials import load_password
from app.obs.link import ObsLink
from app.obs.pusher import ObsPusher
from app.obs.running_app import remove_running_app, write_running_app
from app.obs.target import browser_source_url
from app.settings import Settings
from pipeline.core.events import DelayChange

log = logging.getLogger(__name__)

AVATAR_WINDOW_TITLE = "Lipsync Studio — Avatar"  # render/outputs/avatar_window.py's TITLE


class ObsLive:
    """Owns the running-app record and the pusher. `on_error(message)` is told, from the
    pusher's thread, when OBS does not take a value or the connection drops (once, until
    it does again), and `on_back(message)` when it takes one again."""

    def __init__(self, engine: Engine, settings: Settings, on_error: Callable[[str], None],
                 on_back: Callable[[str], None] = lambda message: None) -> None:
        self.engine = engine
        self.settings = settings
        self._on_error = on_error
        self._on_back = on_back
        self.pusher: ObsPusher | None = None
        self._pusher_for: tuple | None = None
        self._unsubscribe = engine.events.subscribe(self._delay_changed, DelayChange)
        self.apply(settings)

    def mic_sync_offset_ms(self) -> float | None:
        """The offset OBS's mic needs now: the mic stage's measured delay (None: no mic)."""
        stage = self.engine.mic_stage
        return float(stage.sync_offset_ms) if stage is not None else None

    def apply(self, settings: Settings) -> None:
        """Follow new settings: the record, the pusher's target, a new latency mode."""
        old, self.settings = self.settings, settings
        self.write_record()
        wanted = settings.obs_live_updates or settings.captions_to_obs
        where = (settings.obs_host, settings.obs_port)
        if self.pusher is not None and (not wanted or self._pusher_for != where):
            self.pusher.close()
            self.pusher = None
        if wanted and self.pusher is None:
            self.pusher = ObsPusher(ObsLink(*where, load_password()), on_error=self._on_error,
                                    on_back=self._on_back)
            self._pusher_for = where
            self._push_offset()
        elif settings.latency_mode != old.latency_mode:
            self._push_offset()

    def write_record(self) -> None:
        settings = self.settings
        try:
            write_running_app({
                "pid": os.getpid(), "avatar_window_title": AVATAR_WINDOW_TITLE,
                "avatar_window_on_top": settings.output_on_top,
                "display": os.environ.get("DISPLAY"),
                "output_background": settings.output_background,
                "chroma_colour": settings.chroma_colour,
                "browser_source_url": browser_source_url(settings.browser_source_port)
                if settings.browser_source else None,
                "mic_sync_offset_ms": self.mic_sync_offset_ms(),
                "latency_mode": settings.latency_mode})
        except OSError as exc:  # the config folder is read-only or full: obs setup falls back
            log.warning("could not write the running-app record: %s", exc)

    def offer_caption(self, text: str) -> None:
        if self.pusher is not None and self.settings.captions_to_obs:
            self.pusher.offer_caption(self.settings.obs_captions_source, text)

    def _push_offset(self) -> None:
        offset = self.mic_sync_offset_ms()
        if self.pusher is not None and self.settings.obs_live_updates and offset is not None:
            self.pusher.offer_sync_offset(offset, self.settings.latency_mode)

    def _delay_changed(self, change: DelayChange) -> None:
        # On the mic stage's thread: the pusher's offer and a small file write return at once.
        # Every move is logged, from what the offset was to what it is, so that the log reads
        # as the offset went: the stage logs its raises and its calm step-downs, but the
        # reset when the voice has loaded (restart_measurement, which skips the 20-s calm)
        # only here, and without it the next line's "from" did not follow the one before.
        why = (f"raised: capture → pose latency up to {change.worst_ms:.0f} ms"
               if change.new > change.old else "lowered")
        log.info("the mic's OBS sync offset: %.0f → %.0f ms (%s)", change.old * 1e3,
                 change.new * 1e3, why)
        self.write_record()
        self._push_offset()

    def close(self) -> None:
        self._unsubscribe()
        if self.pusher is not None:
            self.pusher.close()
            self.pusher = None
        remove_running_app()
