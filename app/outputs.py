"""The table of outputs besides the main window's view, and the one place that opens,
reconfigures and closes them from the settings, for the window and `--headless` alike.

Each row of OUTPUT_KINDS says, for one kind of output, as obs-studio's
`obs_output_info` does: whether the settings want it, which of its settings reopen it
when they change (the rest it takes in place), how to open it, and what to tell the user
once it is on. Every output then has the one shape of render/outputs/contract.py: fed
the engine's mouth source, media clock and rig, pulling its own frames on its own ticks,
reporting an OutputStatus, closed once.

- avatar_window: the avatar-only window OBS captures;
- browser_source, virtual_camera: pixel outputs (a frame feed and its sink);
- vmc, vtube_studio: pose outputs, sending the avatar's state to other apps' avatars.

Problems are told through `tell(message, severity)` once per cause and never stop the
app. Captions are followed here too: a track fed by the speaker's events, read on a
timer at the heard time, shown by the outputs that show captions, published on the bus
(CaptionShown) and handed to OBS.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt, QTimer

from app.config_files import read_json, write_json
from app.engine import Engine
from app.messages import Severity
from app.settings import Settings, config_dir
from pipeline.core.events import CaptionShown
from pipeline.voice.captions import CaptionTrack
from render.gpu.path_picker import MouthPathPicker
from render.outputs.avatar_window import AvatarWindow
from render.outputs.background import CHROMA, SOLID, TRANSPARENT, Background, parse_colour
from render.outputs.contract import Output, OutputError, OutputStatus
from render.outputs.frame_size import parse_size
from render.outputs.pixel_output import PixelOutput
from render.rigs.loader import AvatarRig, rig_expressions
from render.timing.avatar_motion import AvatarMotion, MotionStrengths

log = logging.getLogger(__name__)

Tell = Callable[[str, Severity], None]


@dataclass(frozen=True, slots=True)
class Wants:
    """What the command line asked for over the settings: the avatar window open
    (--output-window; None: as the settings say), the browser source on a port
    (--browser-source-port)."""

    window: bool | None = None
    browser_port: int | None = None


@dataclass(frozen=True, slots=True)
class OutputKind:
    """One row of the table. `config` is what reopens the output when it changes;
    `adjust` (optional) applies the other settings to an open one in place."""

    name: str
    label: str
    wanted: Callable[[Settings, Wants], bool]
    config: Callable[[Settings, Wants], tuple]
    open: Callable[[Outputs, Settings, Wants], Output]
    announce: Callable[[Output, Settings], str] | None = None
    adjust: Callable[[Output, Settings], None] | None = None


def motion_strengths(settings: Settings) -> MotionStrengths:
    return MotionStrengths(settings.motion_bounce, settings.motion_tilt, settings.motion_shake,
                           settings.motion_sway, settings.motion_head_turn)


def output_background(settings: Settings) -> Background:
    """The outputs' background from the settings (colours were validated there)."""
    if settings.output_background == CHROMA:
        return Background(CHROMA, parse_colour(settings.chroma_colour))
    if settings.output_background == SOLID:
        return Background(SOLID, parse_colour(settings.output_colour))
    return Background()


# -- the avatar window ------------------------------------------------------------------

def _window_wanted(settings: Settings, wants: Wants) -> bool:
    return settings.output_window if wants.window is None else wants.window


def _open_window(outputs: Outputs, settings: Settings, wants: Wants) -> Output:
    size = parse_size(settings.output_size)
    window = AvatarWindow(size, fps=outputs.frame_rate, background=output_background(settings),
                          borderless=settings.output_borderless, on_top=settings.output_on_top,
                          now=outputs.now, mouth_paths=outputs.mouth_paths)
    window.closed = outputs.window_closed_by_user
    _adjust_window(window, settings)
    window.show()
    log.info("avatar window open at %dx%d, background %s", *size, settings.output_background)
    return window


def _adjust_window(window: AvatarWindow, settings: Settings) -> None:
    window.set_window_flags(settings.output_borderless, settings.output_on_top)
    window.set_size(parse_size(settings.output_size))
    window.set_background(output_background(settings))
    # OBS's window capture samples the window on its own frame grid: half an OBS frame
    # later on average (app/settings.py obs_fps).
    window.viewer_delay_s = 0.5 / settings.obs_fps


# -- the browser source -----------------------------------------------------------------

def _browser_port(settings: Settings, wants: Wants) -> int:
    return wants.browser_port if wants.browser_port is not None else settings.browser_source_port


def _open_browser_source(outputs: Outputs, settings: Settings, wants: Wants) -> Output:
    from render.outputs.browser_source import BrowserSource, BrowserSourceError

    source = BrowserSource(_browser_port(settings, wants))
    try:
        source.start()
    except BrowserSourceError as exc:
        raise OutputError(str(exc)) from None
    output = PixelOutput("browser_source", source, *parse_size(settings.output_size),
                         outputs.frame_rate, now=outputs.now, mouth_paths=outputs.mouth_paths,
                         describe=lambda s: f"{s.url}, {s.clients} page(s) connected")
    return output


def _announce_browser_source(output: PixelOutput, settings: Settings) -> str:
    width, height = output.size
    return (f"Browser source: {output.sink.url} (add it to OBS as a Browser source, "
            f"{width}x{height})")


# -- the virtual camera -----------------------------------------------------------------

def _camera_background(settings: Settings) -> Background:
    background = output_background(settings)
    if background.mode == TRANSPARENT:
        # A camera carries no alpha: the key colour, which OBS's chroma key removes.
        return Background(CHROMA, parse_colour(settings.chroma_colour))
    return background


def _open_camera(outputs: Outputs, settings: Settings, wants: Wants) -> Output:
    from render.outputs.virtual_camera import VirtualCamera, VirtualCameraError

    size = parse_size(settings.virtual_camera_size)
    camera = VirtualCamera(*size, settings.virtual_camera_fps, _camera_background(settings))
    try:
        camera.start()
    except VirtualCameraError as exc:
        raise OutputError(str(exc)) from None
    return PixelOutput("virtual_camera", camera, *size, settings.virtual_camera_fps,
                       now=outputs.now, mouth_paths=outputs.mouth_paths,
                       describe=lambda c: f"{c.device}, {c.width}x{c.height} at {c.fps:g} fps")


def _announce_camera(output: PixelOutput, settings: Settings) -> str:
    camera = output.sink
    behind = ("" if settings.output_background != TRANSPARENT else
              f"; a camera has no transparency, so the avatar is on {settings.chroma_colour} "
              "(the chroma key colour) there")
    return (f"Virtual camera on: {camera.device}, {camera.width}x{camera.height} at "
            f"{camera.fps} fps{behind}")


# -- pose outputs ----------------------------------------------------------------------

def _open_vmc(outputs: Outputs, settings: Settings, wants: Wants) -> Output:
    from render.outputs.vmc import VmcOutput

    return VmcOutput(settings.vmc_host, settings.vmc_port, names=settings.vmc_blendshapes,
                     fps=outputs.frame_rate, offset_s=settings.vmc_offset_ms / 1e3)


# VTube Studio's token for us, asked for once (the user allows the plugin in VTube
# Studio) and kept in the config folder.
VTUBE_STUDIO_TOKEN_FILE = "vtube_studio.json"


def _vtube_studio_token() -> str | None:
    data = read_json(config_dir() / VTUBE_STUDIO_TOKEN_FILE)
    token = data.get("token") if isinstance(data, dict) else None
    return token if isinstance(token, str) else None


def _save_vtube_studio_token(token: str) -> None:
    # On the output's own thread: a failed save costs asking again at the next start.
    try:
        write_json(config_dir() / VTUBE_STUDIO_TOKEN_FILE, {"token": token})
    except OSError as exc:
        log.warning("could not keep VTube Studio's token: %s", exc)


def _open_vtube_studio(outputs: Outputs, settings: Settings, wants: Wants) -> Output:
    from render.outputs.vtube_studio import VTubeStudioOutput

    return VTubeStudioOutput(settings.vtube_studio_host, settings.vtube_studio_port,
                             fps=outputs.frame_rate,
                             offset_s=settings.vtube_studio_offset_ms / 1e3,
                             token=_vtube_studio_token(), on_token=_save_vtube_studio_token)


def _announce_status(output: Output, settings: Settings) -> str:
    return output.status().detail


OUTPUT_KINDS: tuple[OutputKind, ...] = (
    OutputKind("avatar_window", "Avatar window", _window_wanted, lambda s, w: (), _open_window,
               adjust=_adjust_window),
    OutputKind("browser_source", "Browser source",
               lambda s, w: w.browser_port is not None or s.browser_source,
               lambda s, w: (_browser_port(s, w), s.output_size), _open_browser_source,
               announce=_announce_browser_source),
    OutputKind("virtual_camera", "Virtual camera", lambda s, w: s.virtual_camera,
               lambda s, w: (s.virtual_camera_size, s.virtual_camera_fps, _camera_background(s)),
               _open_camera, announce=_announce_camera),
    OutputKind("vmc", "VMC output", lambda s, w: s.vmc,
               lambda s, w: (s.vmc_host, s.vmc_port, s.vmc_blendshapes, s.vmc_offset_ms),
               _open_vmc, announce=_announce_status),
    OutputKind("vtube_studio", "VTube Studio", lambda s, w: s.vtube_studio,
               lambda s, w: (s.vtube_studio_host, s.vtube_studio_port, s.vtube_studio_offset_ms),
               _open_vtube_studio, announce=_announce_status),
)


class Outputs:
    """Owns the outputs that are on. `frame_rate` is the rate the window's own view runs
    at (software GL caps it), used by every output here but the camera (its own rate).
    `attach` adds an output opened elsewhere (the main window's view) to what is fed.
    `mouth_paths` chooses each drawing output's mouth-frame path (render/gpu/)."""

    def __init__(self, engine: Engine, settings: Settings, tell: Tell, *,
                 frame_rate: float, now: Callable[[], float] = time.monotonic,
                 mouth_paths: MouthPathPicker | None = None) -> None:
        self.engine = engine
        self.settings = settings
        self.wants = Wants()
        self.frame_rate = frame_rate
        self.now = now
        self.mouth_paths = mouth_paths or MouthPathPicker()
        self._tell = tell
        self._rig: AvatarRig | None = None
        self.opened: dict[str, Output] = {}
        self._configs: dict[str, tuple] = {}
        # Why an output the settings want is not on (told once per cause).
        self.problems: dict[str, str] = {}
        self._attached: list = []
        # The outputs still to get the newest rig (set_rig), one per turn of the event loop.
        self._rig_round: list = []
        self._rig_turn = QTimer()
        self._rig_turn.setSingleShot(True)
        self._rig_turn.timeout.connect(self._next_rig_turn)
        self._blinking, self._breathing = settings.blinking, settings.breathing
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
        # Expressions and motion, one for every output, so all show the same face.
        self.avatar_motion = AvatarMotion(
            lambda: engine.clock.media_time_at(time.monotonic()),
            strengths=motion_strengths(settings), fade_seconds=settings.expression_fade_ms / 1e3)

    # -- what is open ---------------------------------------------------------------------

    @property
    def avatar_window(self) -> AvatarWindow | None:
        return self.opened.get("avatar_window")

    @property
    def browser_source(self):
        output = self.opened.get("browser_source")
        return output.sink if output is not None else None

    @property
    def camera(self):
        output = self.opened.get("virtual_camera")
        return output.sink if output is not None else None

    @property
    def camera_problem(self) -> str | None:
        return self.problems.get("virtual_camera")

    def statuses(self) -> list[OutputStatus]:
        """One status per output the settings want: its own, or why it is not on."""
        wanted = [kind for kind in OUTPUT_KINDS if kind.wanted(self.settings, self.wants)]
        return [self.opened[kind.name].status() if kind.name in self.opened
                else OutputStatus(kind.name, "trouble", f"{kind.label} is off",
                                  self.problems.get(kind.name))
                for kind in wanted]

    # -- wiring ---------------------------------------------------------------------

    def pullers(self) -> list:
        """Every output fed here, those attached first."""
        return [*self._attached, *self.opened.values()]

    def attach(self, output) -> None:
        self._attached.append(output)
        self._wire(output)

    def set_rig(self, rig: AvatarRig) -> None:
        """Show `rig` in every output: the first now, each other in a turn of the event
        loop of its own, so the outputs' ticks run between them. Uploading a rig into an
        output's GL takes 6-30 ms on the GUI thread (2-vCPU VM, llvmpipe, in the running
        app); all of them at once, 25-57 ms, held the ticks past a stall (2.5 periods,
        42 ms at 60 fps): beside the soak's load, 18 busy stalls in 20 switches (at 7 of
        them), and 3 (at 1) with the outputs' turns apart, interleaved in one run
        (bench/results/switch_stalls_vm_2core_xeon.json). An output opened meanwhile gets
        the new rig when it is wired; one closed meanwhile is skipped; a newer rig
        restarts the round."""
        self._rig = rig
        told = self.avatar_motion.set_offered(rig_expressions(rig))
        if told is not None:
            self._tell(told)
        self._rig_round = list(self.pullers())
        self._next_rig_turn()

    def _next_rig_turn(self) -> None:
        """Give the current rig to the next output of the round still open; the one after
        it in the next turn of the event loop."""
        open_now = self.pullers()
        while self._rig_round:
            output = self._rig_round.pop(0)
            if output in open_now:
                output.set_rig(self._rig)
                break
        if self._rig_round and not self._rig_turn.isActive():
            self._rig_turn.start(0)

    def connect_sources(self) -> None:
        """Follow the engine's current mouth source and media clock (after a device
        change gave it new ones)."""
        source, version = self.engine.mouth_source()
        for output in self.pullers():
            output.set_sources(source, self.engine.clock.media_time_at, version)

    def _wire(self, output) -> None:
        """A new output gets the rig, the engine's mouth source and the idle motion."""
        if self._rig is not None:
            output.set_rig(self._rig)
        source, version = self.engine.mouth_source()
        output.set_sources(source, self.engine.clock.media_time_at, version)
        output.set_idle_motion(blinking=self._blinking, breathing=self._breathing)
        output.set_avatar_motion(self.avatar_motion)

    def attach_voice(self, tts) -> None:
        """The voice is loaded: captions can phonemize its sentences from now on."""
        self._phonemize = tts.phonemes_of
        self._apply_captions(force=True)

    def apply(self, settings: Settings, wants: Wants | None = None) -> None:
        """Open, reconfigure or close outputs for `settings` (and what the command line
        `wants`, which stays until a later call gives other wants)."""
        self.settings = settings
        if wants is not None:
            self.wants = wants
        self._blinking, self._breathing = settings.blinking, settings.breathing
        self.avatar_motion.set_strengths(motion_strengths(settings))
        self.avatar_motion.set_fade(settings.expression_fade_ms / 1e3)
        old_lead = self.captions.lead_s if self.captions is not None else None
        for kind in OUTPUT_KINDS:
            self._apply_kind(kind, settings)
        self._apply_captions(force=old_lead != settings.captions_lead_ms / 1e3)
        for output in self.pullers():
            output.set_idle_motion(blinking=settings.blinking, breathing=settings.breathing)

    def _apply_kind(self, kind: OutputKind, settings: Settings) -> None:
        wanted = kind.wanted(settings, self.wants)
        config = kind.config(settings, self.wants)
        output = self.opened.get(kind.name)
        if output is not None and (not wanted or self._configs[kind.name] != config):
            self._close(kind.name)
            output = None
        if not wanted:
            self.problems.pop(kind.name, None)
            return
        if output is not None:
            if kind.adjust is not None:
                kind.adjust(output, settings)
            return
        try:
            output = kind.open(self, settings, self.wants)
        except OutputError as exc:
            if self.problems.get(kind.name) != str(exc):  # once per cause
                self._tell(f"{kind.label} off: {exc}", Severity.ERROR)
            self.problems[kind.name] = str(exc)
            return
        self.problems.pop(kind.name, None)
        self.opened[kind.name], self._configs[kind.name] = output, config
        self._wire(output)
        if hasattr(output, "start"):
            output.start()
        if kind.announce is not None:
            self._tell(kind.announce(output, settings), Severity.INFO)

    def _close(self, name: str) -> None:
        output = self.opened.pop(name)
        self._configs.pop(name, None)
        output.close()

    def window_closed_by_user(self) -> None:
        """The user closed the avatar window itself: it is gone, and the app is told."""
        window = self.opened.pop("avatar_window", None)
        self._configs.pop("avatar_window", None)
        if window is not None:
            window.shutdown()
            window.deleteLater()
        if self.window_closed is not None:
            self.window_closed()

    def close(self) -> None:
        self._rig_turn.stop()
        self._caption_timer.stop()
        if self._unsubscribe_captions is not None:
            self._unsubscribe_captions()
        for name in list(self.opened):
            self._close(name)

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
                self._feed_captions, *CaptionTrack.EVENTS)
        shows = any(_shows_captions(output) for output in self.opened.values())
        shown = self.settings.captions_in_window and shows or self.settings.captions_to_obs
        if shown and not self._caption_timer.isActive():
            # Each tick of the display's rate at most: a caption is never later than the
            # frame it goes with by more than a frame.
            self._caption_timer.start(max(1, round(1000 / self.frame_rate)))
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
        if self.settings.captions_in_window or not text:
            for output in self.opened.values():
                if _shows_captions(output):
                    output.set_caption(text)
        self.engine.events.publish(CaptionShown(text))
        if self.on_caption is not None and self.settings.captions_to_obs:
            self.on_caption(text)


def _shows_captions(output: Output) -> bool:
    return getattr(output, "shows_captions", False)
