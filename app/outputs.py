"""The outputs besides the main window's view: the avatar-only window OBS captures, the
browser source's page and the virtual camera. One place that opens, reconfigures and
closes them from the settings, for the windowed app and `--headless` alike.

Each output pulls its own frames on its own ticks from the engine's media clock; this
module only wires them to the engine (mouth source, clock, rig) and follows settings.
Problems are told through `tell(message, severity)` and never stop the app.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import Qt, QTimer

from app.engine import Engine
from app.settings import Settings, parse_size
from app.ui.messages import Severity
from pipeline.core.events import SentenceTimed, SpeechFinished, WordTimed
from pipeline.voice.captions import CaptionTrack
from render.outputs.avatar_window import AvatarWindow
from render.outputs.background import (
    CHROMA,
    SOLID,
    TRANSPARENT,
    Background,
    parse_colour,
)
from render.outputs.browser_source import BrowserSource, BrowserSourceError
from render.outputs.frame_feed import FrameFeed
from render.outputs.virtual_camera import VirtualCamera, VirtualCameraError
from render.rigs.loader import AvatarRig

log = logging.getLogger(__name__)

Tell = Callable[[str, Severity], None]

# How often the browser feed takes up the pages' measured paint delay: it moves with the
# machine's load over seconds, not frame to frame.
PAGE_DELAY_REVIEW_MS = 1000


def output_background(settings: Settings) -> Background:
    """The outputs' background from the settings (colours were validated there)."""
    if settings.output_background == CHROMA:
        return Background(CHROMA, parse_colour(settings.chroma_colour))
    if settings.output_background == SOLID:
        return Background(SOLID, parse_colour(settings.output_colour))
    return Background()


class Outputs:
    """Owns the outputs that are on. `frame_rate` is the rate the window's own view runs
    at (software GL caps it), used by every output here too."""

    def __init__(self, engine: Engine, settings: Settings, tell: Tell, *,
                 frame_rate: float, now: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine
        self.settings = settings
        self._tell = tell
        self._frame_rate = frame_rate
        self._now = now
        self._rig: AvatarRig | None = None
        self.avatar_window: AvatarWindow | None = None
        self.browser_source: BrowserSource | None = None
        self.camera: VirtualCamera | None = None
        # Why the camera is off although the settings want it (None: not so).
        self.camera_problem: str | None = None
        self._camera_background: Background | None = None
        # The offscreen feeds by the output they feed ("browser", "camera").
        self.feeds: dict[str, FrameFeed] = {}
        # Told when the user closes the avatar window, so the app can save it as off.
        self.window_closed: Callable[[], None] | None = None
        # Captions: a track fed by the speaker's events, read on a timer at the heard time.
        self._phonemize: Callable[[str], str] | None = None
        self.captions: CaptionTrack | None = None
        self._unsubscribe_captions: Callable[[], None] | None = None
        self._caption_shown = ""
        # Told each new caption text too (OBS's text source), when captions_to_obs.
        self.on_caption: Callable[[str], None] | None = None
        self._captions_lock = threading.Lock()
        self._caption_timer = QTimer()
        self._caption_timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._caption_timer.timeout.connect(self._show_caption)
        self._page_delay_timer = QTimer()
        self._page_delay_timer.timeout.connect(self._follow_page_delay)

    # -- wiring ---------------------------------------------------------------------

    def _pullers(self):
        """Every output here that pulls frames: the window and the feeds."""
        return [output for output in (self.avatar_window, *self.feeds.values()) if output is not None]

    def set_rig(self, rig: AvatarRig) -> None:
        self._rig = rig
        for output in self._pullers():
            output.set_rig(rig)

    def connect_sources(self) -> None:
        """Follow the engine's current mouth source and media clock (after a device
        change gave it new ones)."""
        source, version = self.engine.mouth_source()
        for output in self._pullers():
            output.set_sources(source, self.engine.clock.media_time_at, version)

    def attach_voice(self, tts) -> None:
        """The voice is loaded: captions can phonemize its sentences from now on."""
        self._phonemize = tts.phonemes_of
        self._apply_captions(force=True)

    def apply(self, settings: Settings, *, window: bool | None = None,
              browser_port: int | None = None) -> None:
        """Open, reconfigure or close outputs for `settings`. `window` overrides
        settings.output_window (the command line's --output-window); `browser_port`
        turns the browser source on at that port (--browser-source-port)."""
        self.settings = settings
        want_window = settings.output_window if window is None else window
        if want_window:
            self._open_window()
        elif self.avatar_window is not None:
            self._close_window()
        old_lead = self.captions.lead_s if self.captions is not None else None
        self._apply_browser_source(browser_port)
        self._apply_camera()
        self._apply_captions(force=old_lead != settings.captions_lead_ms / 1e3)
        for output in self._pullers():
            output.set_idle_motion(blinking=settings.blinking, breathing=settings.breathing)

    def close(self) -> None:
        self._caption_timer.stop()
        if self._unsubscribe_captions is not None:
            self._unsubscribe_captions()
        if self.avatar_window is not None:
            self._close_window()
        self._close_browser_source()
        self._close_camera()

    # -- the virtual camera -----------------------------------------------------------

    def _apply_camera(self) -> None:
        settings = self.settings
        size = parse_size(settings.virtual_camera_size)
        fps = settings.virtual_camera_fps
        background = output_background(settings)
        if background.mode == TRANSPARENT:
            # A camera carries no alpha: the key colour, which OBS's chroma key removes.
            background = Background(CHROMA, parse_colour(settings.chroma_colour))
        camera = self.camera
        if camera is not None and (not settings.virtual_camera or (camera.width, camera.height) != size
                                   or camera.fps != fps or self._camera_background != background):
            self._close_camera()
            camera = None
        if not settings.virtual_camera:
            self.camera_problem = None
            return
        if camera is not None:
            return
        camera = VirtualCamera(*size, fps, background)
        try:
            camera.start()
        except VirtualCameraError as exc:
            if str(exc) != self.camera_problem:  # once per cause, not at every settings change
                self._tell(f"Virtual camera off: {exc}", Severity.ERROR)
            self.camera_problem = str(exc)
            return
        self.camera_problem = None
        self._camera_background = background
        feed = FrameFeed(*size, fps, now=self._now, readback=camera.readback)
        feed.sinks.append(camera.offer)
        self.camera, self.feeds["camera"] = camera, feed
        self._start_feed(feed)
        behind = ("" if settings.output_background != TRANSPARENT else
                  f"; a camera has no transparency, so the avatar is on {settings.chroma_colour} "
                  "(the chroma key colour) there")
        self._tell(f"Virtual camera on: {camera.device}, {size[0]}x{size[1]} at {fps} fps{behind}",
                   Severity.INFO)

    def _close_camera(self) -> None:
        feed = self.feeds.pop("camera", None)
        if feed is not None:
            feed.stop()
        if self.camera is not None:
            self.camera.stop()
            self.camera = None

    # -- captions ---------------------------------------------------------------------

    def _apply_captions(self, force: bool) -> None:
        """A new track when the lead changed (a track's lead is fixed: its published show
        times hold it); the timer runs while captions have somewhere to go."""
        if self._phonemize is None:
            return
        if force or self.captions is None:
            if self._unsubscribe_captions is not None:
                self._unsubscribe_captions()
            self.captions = CaptionTrack(self._phonemize, lead_s=self.settings.captions_lead_ms / 1e3)
            self._unsubscribe_captions = self.engine.events.subscribe(
                self._feed_captions, SentenceTimed, WordTimed, SpeechFinished)
        shown = (self.settings.captions_in_window and (
            self.avatar_window is not None or self.browser_source is not None)
            or self.settings.captions_to_obs)
        if shown and not self._caption_timer.isActive():
            # Each tick of the display's rate at most: a caption is never later than the
            # frame it goes with by more than a frame.
            self._caption_timer.start(max(1, round(1000 / self._frame_rate)))
        elif not shown:
            self._caption_timer.stop()
            self._set_caption("")

    def _feed_captions(self, event) -> None:
        # On the speaker's thread. A track is fed from one thread at a time: the lock
        # keeps a Stop's cut (GUI thread) out of a word being added.
        track = self.captions
        with self._captions_lock:
            track.on_event(event)

    def speech_stopped(self) -> None:
        """The user stopped the speech: its words not heard yet leave the captions."""
        if self.captions is not None:
            with self._captions_lock:
                self.captions.stop(self.engine.clock.media_time_now())

    def _show_caption(self) -> None:
        self._set_caption(self.captions.text_at(self.engine.clock.media_time_now()))

    def _set_caption(self, text: str) -> None:
        if text == self._caption_shown:
            return
        self._caption_shown = text
        if self.avatar_window is not None:
            self.avatar_window.set_caption(text)
        if self.browser_source is not None:
            self.browser_source.set_caption(text)
        if self.on_caption is not None and self.settings.captions_to_obs:
            self.on_caption(text)

    # -- the browser source ----------------------------------------------------------

    def _apply_browser_source(self, port: int | None) -> None:
        settings = self.settings
        want = port is not None or settings.browser_source
        port = port if port is not None else settings.browser_source_port
        size = parse_size(settings.output_size)
        source, feed = self.browser_source, self.feeds.get("browser")
        if source is not None and (not want or source.port != port
                                   or (feed.width, feed.height) != size):
            self._close_browser_source()
            source = None
        if not want or source is not None:
            return
        source = BrowserSource(port)
        try:
            source.start()
        except BrowserSourceError as exc:
            self._tell(f"Browser source off: {exc}", Severity.ERROR)
            return
        feed = FrameFeed(*size, self._frame_rate, now=self._now)
        feed.sinks.append(source.publish)
        self._page_delay_timer.start(PAGE_DELAY_REVIEW_MS)
        self.browser_source, self.feeds["browser"] = source, feed
        self._start_feed(feed)
        self._tell(f"Browser source: {source.url} (add it to OBS as a Browser source, "
                   f"{size[0]}x{size[1]})", Severity.INFO)

    def _follow_page_delay(self) -> None:
        """The pages' measured paint delay (median of the recent frames of every page)
        becomes part of the feed's presentation, so the page shows the mouth for what is
        heard as it paints."""
        feed, source = self.feeds.get("browser"), self.browser_source
        if feed is None or source is None:
            self._page_delay_timer.stop()
            return
        delays = source.delays_ms()
        if delays:
            feed.extra_latency_s = float(np.median(delays)) / 1e3

    def _close_browser_source(self) -> None:
        feed = self.feeds.pop("browser", None)
        if feed is not None:
            feed.stop()
        if self.browser_source is not None:
            self.browser_source.stop()
            self.browser_source = None

    def _start_feed(self, feed: FrameFeed) -> None:
        self._wire(feed)
        feed.start()

    def _wire(self, output) -> None:
        """A new output (window or feed) gets the rig and the engine's mouth source."""
        if self._rig is not None:
            output.set_rig(self._rig)
        source, version = self.engine.mouth_source()
        output.set_sources(source, self.engine.clock.media_time_at, version)

    # -- the avatar window -------------------------------------------------------------

    def _open_window(self) -> None:
        settings = self.settings
        size = parse_size(settings.output_size)
        background = output_background(settings)
        window = self.avatar_window
        if window is None:
            window = AvatarWindow(size, fps=self._frame_rate, background=background,
                                  borderless=settings.output_borderless,
                                  on_top=settings.output_on_top, now=self._now)
            window.closed = self._on_window_closed
            self.avatar_window = window
            self._wire(window)
            window.show()
            log.info("avatar window open at %dx%d, background %s", *size, background.mode)
        else:
            window.set_window_flags(settings.output_borderless, settings.output_on_top)
            window.set_size(size)
            window.set_background(background)
        window.viewer_delay_s = 0.5 / settings.obs_fps

    def _close_window(self) -> None:
        window, self.avatar_window = self.avatar_window, None
        window.closed = None
        window.shutdown()
        window.close()
        window.deleteLater()

    def _on_window_closed(self) -> None:
        window, self.avatar_window = self.avatar_window, None
        if window is not None:
            window.shutdown()
            window.deleteLater()
        if self.window_closed is not None:
            self.window_closed()
