"""The app behind any front end: the engine (voice, speaker, audio, microphone), the
outputs, the OBS link, the avatar's rig, the voice's loading and the API server, started,
given new settings and closed as one.

The main window (app/ui/main_window.py) and `--headless` (app/headless.py) are thin front
ends over one Studio each, and the API server (app/api/) drives the same Studio, so the
three behave alike: the same frame rate choice, the same microphone that comes back, the
same messages.

Threads: a Studio lives on the Qt GUI thread and all its methods are called there. The
engine's events arrive on its worker threads and are re-posted here through Qt signals;
the API server calls in through `call_soon` (a queued call onto this thread).

Messages for the user go on one MessageBoard (app/messages.py); each one posted is also
handed to `on_message`, for a front end that prints or redraws them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from app.avatar_library import Avatar, AvatarLibrary, read_avatar, voice_of
from app.engine import Engine
from app.first_audio import FirstAudio
from app.frame_rate_watch import DegradedWatch, FrameRateWatch
from app.heap import heap_figures
from app.hotkeys import Hotkeys, Problem
from app.messages import EVENT_SECONDS, Message, MessageBoard, Severity
from app.obs.live import ObsLive
from app.outputs import Outputs, Wants
from app.settings import Settings, SettingsStore
from app.speech_queue import QueuedSpeech, SpeechQueue
from pipeline.audio.devices import STUCK_MESSAGE
from pipeline.core.events import (
    DeviceNotice,
    InputStatus,
    SpeechFailed,
    SpeechFinished,
    SpeechNotice,
    SpeechStarted,
)
from pipeline.core.expressions import NEUTRAL, ExpressionError
from pipeline.core.modes import MODE_NAMES
from pipeline.core.sync_metrics import viseme_change_offsets
from pipeline.face.landmarks import PortraitError
from pipeline.infer.engine import batch_sizes_for
from pipeline.text.input import TextInputError
from pipeline.voice.voice_files import VoiceError
from render.gl.offscreen import OffscreenError, gl_renderer, renders_on_cpu
from render.gpu.path_picker import MouthPathPicker
from render.outputs.avatar_view import PRESENTED
from render.rigs.loader import AvatarRig, is_picture
from render.rigs.manifest import RigError

log = logging.getLogger(__name__)

# What messages about a condition are about (see app.messages).
AUDIO = "audio"
MIC = "microphone"
SOUND_SERVER = "sound server"
VOICE = "voice"
AVATAR = "avatar"
FELL_BEHIND = "fell behind"
FRAME_RATE = "frame rate"
DEGRADED = "degraded frames"
MIC_MUTE = "microphone mute"
LIBRARY = "avatar library"
EXPRESSION = "expression"
HOTKEYS = "hotkeys"
HIDDEN = "avatar hidden"
OBS = "obs"
INFERENCE = "inference"
MOUTH_FRAMES = "mouth frames"
API = "api"
SETTINGS_FILE = "settings file"
# Microphone statuses that are good news: shown for a while, not until the next status.
MIC_GOOD_NEWS = ("started", "recovered", "available")
# How often the studio looks for a returned microphone and lets expired messages go.
FOLLOW_INTERVAL_MS = 500
# Viseme changes further than this from any onset of that viseme are not lip-sync
# errors but something else (a held fallback, a cut): they are counted, not averaged.
MATCH_WINDOW_S = 0.1
# What the API's status reports of each output's presenter (Presenter.stats()).
FRAME_COUNTS = ("presented", "late", "held", "interpolated", "missed_ticks", "stalls",
                "busy_stalls", "longest_tick_gap_ms", "longest_tick_gap_last_minute_ms", "fps")


class Studio(QObject):
    """One app. `wants` is what the command line asked for over the settings; `api_port`
    turns the API on at that port whatever the settings say (--api-port);
    `measure_modes` times each latency mode's first audio once the voice is warm (for
    the settings panel)."""

    voice_progress = Signal(float)
    voice_ready = Signal()
    # The outputs were opened, closed or reconfigured (a front end shows which are on).
    outputs_changed = Signal()
    # A speech started: its first audio (FirstAudio), for a front end that shows it.
    speech_started = Signal(object)
    # An API client asks for a token: the front end asks the user (ApiServer.decide).
    token_requested = Signal(str)
    # The avatar in use changed (the library view marks it).
    avatar_changed = Signal()
    # An expression was chosen (by a hotkey, the window or the API): its name.
    expression_changed = Signal(str)
    # The hotkeys were (re)bound: their problems are in hotkey_problems.
    hotkeys_changed = Signal()
    # From worker threads to this one (queued delivery).
    _event = Signal(object)
    _voice_loaded = Signal(int, object, object)
    _voice_failed = Signal(str)
    _text = Signal(str, object)
    _call = Signal(object)

    def __init__(self, store: SettingsStore, settings: Settings, *, wants: Wants = Wants(),
                 api_port: int | None = None, measure_modes: bool = True) -> None:
        super().__init__()
        self.store = store
        self.settings = settings
        self.wants = wants
        self.api_port = api_port
        self._measure = measure_modes
        self.messages = MessageBoard()
        self.on_message: Callable[[Message], None] | None = None
        self.closed = threading.Event()
        self._event.connect(self._on_event)
        self._voice_loaded.connect(self._on_voice_loaded)
        self._voice_failed.connect(self._on_voice_failed)
        self._text.connect(lambda text, key: self.tell(text, key=key))
        self._call.connect(lambda call: call())
        self.engine = Engine(settings)
        self.engine.events.subscribe(self._event.emit, SpeechStarted, SpeechFinished,
                                     SpeechNotice, SpeechFailed, InputStatus, DeviceNotice)
        self.tts = None
        self._voice_asked = 0  # the latest load_voice's number: an older load that ends later is dropped
        # Library avatars (use_avatar) are read here. One worker: reads queue rather than
        # compete with the display and the voice for a 2-core machine's CPU, and a choice
        # passed over before its turn is never read. An executor, not QThreadPool: the rig
        # comes back through call_soon either way, and it needs no QRunnable.
        self._avatar_reader = ThreadPoolExecutor(1, thread_name_prefix="avatar-reader")
        # The latest avatar choice's number (use_avatar, or any avatar shown): a read for an
        # older choice that ends later is not shown.
        self._avatar_asked = 0
        # The latest use_avatar's avatar while it is read, else None: next/previous step
        # from it, so quick presses move one place each.
        self._avatar_reading: Avatar | None = None
        self.rig: AvatarRig | None = None
        self.first_audio: FirstAudio | None = None
        self.finished: SpeechFinished | None = None
        self.mode_first_audio_ms: dict[str, float] = {}
        # Where the voice's inference runs, once it is loaded, and the mouth frames
        # (Engine.inference_text).
        self.inference: str | None = None
        # Which path each output makes its mouth frames on, and why (MouthPathPicker).
        self.mouth_paths = MouthPathPicker(settings.mouth_frames, on_change=self._show_mouth_paths)
        self.mouth_frames: str | None = None
        # The latency mode of each request said and not started yet.
        self._request_modes: dict[int, str | None] = {}
        self.frame_rate = self._choose_frame_rate(settings)
        self.queue = SpeechQueue(self._say_now, self.engine.stop)
        self.outputs = Outputs(self.engine, settings, self.tell, frame_rate=self.frame_rate,
                               mouth_paths=self.mouth_paths)
        self.outputs.window_closed = self._on_avatar_window_closed
        self.obs = ObsLive(self.engine, settings, lambda text: self._text.emit(text, OBS),
                           lambda text: self.call_soon(lambda: self.tell(
                               text, Severity.INFO, key=OBS, seconds=EVENT_SECONDS)))
        self.outputs.on_caption = self.obs.offer_caption
        self.api = None
        self._follow = QTimer(self)
        self._follow.timeout.connect(self._follow_returned_mic)
        self._follow.timeout.connect(self._follow_sound_server)
        self._follow.timeout.connect(self._follow_outputs)
        self._follow.timeout.connect(self._expire_messages)
        self._follow.timeout.connect(self._follow_frame_rate)
        self._frame_rate_watch = FrameRateWatch(self.frame_rate)
        self._degraded_watch = DegradedWatch()
        # The mic's mute (a hotkey) and push to talk, kept across the mic's reopening.
        self.mic_muted = False
        self.push_to_talk = False
        self.push_to_talk_held = False
        # Heard in every application where the desktop allows (is_global), else the
        # window installs them as its own shortcuts.
        self.hotkeys = Hotkeys(settings.hotkeys, self.do_action, self.call_soon)
        self.hotkey_problems: list[Problem] = []
        # A front end with a window sets this: it binds the hotkeys as its own shortcuts
        # where they cannot be global. Headless has none: then no key is heard at all.
        self.hotkeys_in_window = False
        # What was last said of each output that is not simply on (its status line).
        self._output_news: dict[str, str] = {}
        for number, problem in enumerate(store.problems):
            self.tell(f"In {store.path}: {problem}", key=(SETTINGS_FILE, number))
        self.library = AvatarLibrary(store.path.parent / "avatars")
        for number, problem in enumerate(self.library.problems):
            self.tell(problem, key=(LIBRARY, number))

    # -- start and close ------------------------------------------------------------

    def start(self) -> None:
        """Avatar, audio, microphone, outputs and API now; the voice loads on a thread of
        its own (voice_progress, then voice_ready or a message)."""
        self.load_avatar(self.settings.avatar_manifest)
        self.engine.start_audio()
        self._show_audio_state()
        problem = self.engine.start_mic()
        if problem:
            self.tell(problem, key=MIC)
        self._show_mic_state()
        # The record was written before the mic had a stage: now with its offset, for an
        # `obs setup` run before the delay first moves (it may never need to).
        self.obs.write_record()
        self._bind_hotkeys(self.hotkeys.start())
        self.outputs.apply(self.settings, self.wants)
        self.outputs.connect_sources()
        self.outputs_changed.emit()
        self._apply_api()
        self._follow.start(FOLLOW_INTERVAL_MS)
        self.load_voice()

    def close(self) -> None:
        self.closed.set()
        self._follow.stop()
        self.hotkeys.stop()
        if self.api is not None:
            self.api.close()
            self.api = None
        self.outputs.close()
        self.obs.close()
        self.engine.close()
        # A read under way ends on its own; what it read is not shown (_show_read_avatar).
        self._avatar_reader.shutdown(wait=False, cancel_futures=True)

    def call_soon(self, call: Callable[[], None]) -> None:
        """Run `call()` on the studio's thread (from any thread; it returns at once)."""
        self._call.emit(call)

    # -- messages -------------------------------------------------------------------

    def tell(self, message: str, severity: Severity = Severity.WARNING, *,
             key: Hashable | None = None, seconds: float | None = None) -> None:
        """Tell the user `message` (MessageBoard.post says what `key` and `seconds` do). A
        condition told again in the same words while it is shown is not news: a front end
        hears of it only when the board changed (headless printed such a line twice)."""
        log.debug("message (%s): %s", severity.value, message)
        before = self.messages.version
        posted = self.messages.post(message, severity, key=key, seconds=seconds)
        if self.on_message is not None and self.messages.version != before:
            self.on_message(posted)

    def forget(self, key: Hashable) -> None:
        """The condition `key` is over: its message goes."""
        if self.messages.clear(key) and self.on_message is not None:
            self.on_message(None)

    def _expire_messages(self) -> None:
        if self.messages.expire() and self.on_message is not None:
            self.on_message(None)

    # -- the frame rate -------------------------------------------------------------

    def _choose_frame_rate(self, settings: Settings) -> int:
        """The target frame rate, or the software-GL one where OpenGL draws on the CPU
        (and then the user is told)."""
        if settings.software_gl_fps >= settings.target_fps:
            return settings.target_fps
        try:
            renderer = gl_renderer()
        except OffscreenError as exc:
            log.warning("could not ask OpenGL which renderer it uses: %s", exc.message)
            return settings.target_fps
        if not renders_on_cpu(renderer):
            return settings.target_fps
        self.tell(f"OpenGL draws on the CPU here ({renderer}): the avatar is shown at "
                  f"{settings.software_gl_fps} fps, not {settings.target_fps}, so that the voice "
                  "keeps its share of the CPU ('Frame rate with software OpenGL' in Settings).",
                  Severity.INFO)
        return settings.software_gl_fps

    # -- the voice ------------------------------------------------------------------

    def load_voice(self) -> None:
        """Load the voice the avatar in use speaks with (voice_choice) on the voice-loader
        thread, and speak with it once it is warm (voice_progress, then voice_ready or a
        message). The voice in use speaks until then, and stays if the new one cannot be
        loaded; a later call wins over one still loading."""
        voice, speaker = self.voice_choice()
        self._voice_asked += 1
        self.forget(VOICE)  # a new choice: what was said of the last one is over
        threading.Thread(target=self._load_voice, args=(self._voice_asked, voice, speaker),
                         name="voice-loader", daemon=True).start()

    def _load_voice(self, asked: int, voice: str | None, speaker: int) -> None:
        try:
            # A studio closed while its voice loads stops the warm-up at the next shape:
            # seconds of synthesis nobody would hear, on a core the rest of the process
            # (or, in the test suite, the next test) needs.
            tts = Engine.load_voice(self.voice_progress.emit, self.settings.inference_provider,
                                    self.closed, voice=voice, speaker=speaker,
                                    batch_sizes=self.voice_batch_sizes())
            if tts is None:
                return
            # The modes are timed once, with the first voice: the panel's figures.
            measured = (Engine.measure_modes(tts) if self._measure and self.tts is None
                        else self.mode_first_audio_ms)
            self._voice_loaded.emit(asked, tts, measured)
        except VoiceError as exc:  # in the user's words; the voice in use stays
            if self.closed.is_set():
                return
            if self.tts is None and voice is not None:
                # Nothing to keep (the app is starting): the bundled voice speaks, said so.
                self._voice_failed.emit(f"The voice could not be loaded: {exc} The bundled "
                                        "voice speaks until it is fixed or another is chosen.")
                self._load_voice(asked, None, 0)
                return
            self._voice_failed.emit(f"The voice could not be loaded: {exc}")
        except Exception as exc:  # told; the studio stays usable
            if self.closed.is_set():
                return
            log.exception("voice failed to load")
            self._voice_failed.emit(f"The voice could not be loaded: {exc}")

    def _on_voice_loaded(self, asked: int, tts, measured: dict[str, float]) -> None:
        if self.closed.is_set() or asked != self._voice_asked:
            # Closed after the warm-up (checked here, on the thread that closes, so no
            # voice reaches a closed studio's engine), or another voice asked for since.
            tts.close()
            return
        before, self.tts = self.tts, tts
        self.mode_first_audio_ms = measured
        self.engine.attach_voice(tts)
        self.outputs.attach_voice(tts)
        self._tell_inference()
        if before is not None:
            before.close()
        self.voice_ready.emit()

    def _show_mouth_paths(self) -> None:
        """The outputs' mouth-frame paths into the status; one that is not what the
        settings ask, or CUDA's failure, also as a warning."""
        if self.closed.is_set():
            return
        self.mouth_frames = self.mouth_paths.summary()
        if self.tts is not None:
            self._tell_inference()
        warnings = self.mouth_paths.warnings()
        if warnings:
            self.tell("Mouth frames by " + "; by ".join(warnings) + ".", key=MOUTH_FRAMES)
        else:
            self.forget(MOUTH_FRAMES)

    def _tell_inference(self) -> None:
        """Where the voice and the mouth frames run, and why, as a message of its own for
        as long as it is true: a warning where a provider asked for by name is missing,
        else information (with "auto" it was only in the log, so the window never said
        whether the GPU was used)."""
        self.inference, fell_back = Engine.inference_text(self.tts, self.mouth_frames)
        self.tell(self.inference, Severity.WARNING if fell_back else Severity.INFO, key=INFERENCE)

    def _on_voice_failed(self, message: str) -> None:
        self.tell(message, Severity.ERROR, key=VOICE)

    @property
    def voice_ready_for_speech(self) -> bool:
        return self.engine.voice_ready_for_speech()

    # -- speech ---------------------------------------------------------------------

    def say(self, text: str, mode: str | None = None, source: str = "window"
            ) -> QueuedSpeech | None:
        """Speak `text` through the speech queue: cutting what is being said
        ("interrupt") or after what is waiting ("queue"); `mode` None takes the setting.
        The queue's entry, None while the voice loads. TextInputError (its message for the
        user) for text with nothing the voice can speak, before the queue: it must not cut
        what is being said, as a new line does, only to fail after."""
        if not self.voice_ready_for_speech:
            return None
        self.tts.prepare(text)
        return self.queue.add(text, mode or self.settings.speech_queue, source)

    def _say_now(self, text: str) -> int | None:
        request = self.engine.say(text)
        if request is not None:
            self._request_modes[request] = self.settings.latency_mode
        return request

    def append(self, text: str, final: bool = True) -> int | None:
        """Continue the current speech with `text` (Engine.append)."""
        request = self.engine.append(text, final)
        if request is not None:
            self._request_modes[request] = self.settings.latency_mode
        return request

    def stop(self) -> None:
        """Silence: what is being said is cut and what waits in the queue dropped."""
        self.queue.clear()
        self.outputs.speech_stopped()

    def skip(self) -> None:
        """Cut what is being said; the queue goes on with the next line."""
        self.queue.skip()
        self.outputs.speech_stopped()

    def _on_event(self, event) -> None:
        if isinstance(event, (InputStatus, DeviceNotice)):
            self._device_news(event)
            return
        if isinstance(event, SpeechStarted):
            self.first_audio = FirstAudio(event.first_audio_s * 1000, event.synthesis_s * 1000,
                                          self._request_modes.pop(event.request, None))
            self.speech_started.emit(self.first_audio)
        elif isinstance(event, SpeechFinished):
            self.finished = event
        elif isinstance(event, (SpeechNotice, SpeechFailed)):
            self.tell(event.message)
        if isinstance(event, (SpeechFinished, SpeechFailed)):  # either ends a request
            self._request_modes.pop(event.request, None)
            self.queue.finished(event.request)
        if isinstance(event, SpeechFinished) and (event.gaps or event.underruns):
            self.tell(
                f"Synthesis fell behind playback: {event.gaps} longer pause(s) between "
                f"sentences, {event.underruns} chunk(s) too late to play in full. A faster "
                "latency mode or a less busy computer helps.",
                key=FELL_BEHIND, seconds=EVENT_SECONDS)

    # -- actions (hotkeys, the window's buttons, the API) -----------------------------

    def do_action(self, action: str, pressed: bool = True) -> None:
        """One of HOTKEY_ACTIONS or "expression:NAME"; `pressed` False is a key let go
        (only push to talk acts on it)."""
        if action == "push_to_talk":
            self.push_to_talk_held = pressed
            self._apply_mic_mute()
            return
        if not pressed:
            return
        if action == "stop":
            self.stop()
        elif action == "mic_mute":
            self.mic_muted = not self.mic_muted
            self._apply_mic_mute()
            self.tell("Microphone muted: the avatar's mouth does not follow it until unmuted."
                      if self.mic_muted else "Microphone unmuted.", Severity.INFO, key=MIC_MUTE,
                      seconds=None if self.mic_muted else EVENT_SECONDS)
        elif action == "speak_clipboard":
            from PySide6.QtGui import QGuiApplication

            text = QGuiApplication.clipboard().text().strip()
            if not text:
                self.tell("The clipboard holds no text to speak.", Severity.INFO,
                          seconds=EVENT_SECONDS)
            else:
                try:
                    if self.say(text, source="clipboard") is None:
                        self.tell("The voice is still loading: the clipboard was not spoken.",
                                  Severity.INFO, seconds=EVENT_SECONDS)
                except TextInputError as exc:
                    self.tell(f"The clipboard was not spoken. {exc}", Severity.INFO,
                              seconds=EVENT_SECONDS)
        elif action in ("next_avatar", "previous_avatar"):
            chosen = (self.settings.avatar_manifest if self._avatar_reading is None
                      else self._avatar_reading.setting)
            self.use_avatar(self.library.step(chosen, 1 if action == "next_avatar" else -1))
        elif action.startswith("expression:"):
            self.set_expression(action.removeprefix("expression:"))
        elif action == "toggle_avatar":
            motion = self.outputs.avatar_motion
            motion.set_hidden(not motion.hidden)
            if motion.hidden:
                self.tell("The avatar is hidden in every output (the window, the avatar "
                          "window, the browser source, the virtual camera); the same hotkey "
                          "shows it again.", Severity.INFO, key=HIDDEN)
            else:
                self.forget(HIDDEN)
        else:  # the settings let no other action through (app/settings.py HOTKEY_ACTIONS)
            raise ValueError(f"unknown action {action!r}")

    def set_expression(self, name: str) -> str | None:
        """Cross-fade every output's avatar to expression `name` ("neutral" for none).
        Where the avatar has none of that name: the message listing those it has (also
        told the user)."""
        try:
            self.outputs.avatar_motion.set_expression(name)
        except ExpressionError as exc:
            self.tell(exc.message, Severity.INFO, key=EXPRESSION, seconds=EVENT_SECONDS)
            return exc.message
        self.forget(EXPRESSION)
        self.expression_changed.emit(name)
        return None

    @property
    def expressions(self) -> tuple[str, ...]:
        """The avatar's expressions, neutral first."""
        return (NEUTRAL, *self.outputs.avatar_motion.offered)

    @property
    def expression(self) -> str:
        return self.outputs.avatar_motion.fader.chosen

    def _bind_hotkeys(self, problems: list[Problem]) -> None:
        """Say what the hotkeys just bound could not do (each problem once, until it is
        gone), and put push to talk in force where it has a key."""
        for number in range(len(self.hotkey_problems)):
            self.forget((HOTKEYS, number))
        self.hotkey_problems = problems
        for number, problem in enumerate(problems):
            # Of all hotkeys at once (Wayland, no desktop): news of how they work here;
            # of some: a fault in the user's choice.
            self.tell(problem.text, Severity.INFO if not problem.actions else Severity.WARNING,
                      key=(HOTKEYS, number))
        # Push to talk in force only where its key can be heard: else the mic stayed shut.
        heard = self.hotkeys.is_global or self.hotkeys_in_window
        bound = heard and bool(self.settings.hotkeys.get("push_to_talk")) and not any(
            "push_to_talk" in p.actions and not p.bound for p in problems)
        self.set_push_to_talk(bound)
        self.hotkeys_changed.emit()

    def set_push_to_talk(self, on: bool) -> None:
        """With a push-to-talk key in use, the mic drives the mouth only while it is held."""
        self.push_to_talk = on
        self._apply_mic_mute()

    def _apply_mic_mute(self) -> None:
        """Mute and push to talk onto the mic's stage, after anything that may reopen it."""
        stage = self.engine.mic_stage
        if stage is not None:
            stage.muted = self.mic_muted or (self.push_to_talk and not self.push_to_talk_held)

    # -- devices --------------------------------------------------------------------

    def _device_news(self, event: InputStatus | DeviceNotice) -> None:
        """The microphone's news, and what the engine says of the microphone (the
        output's is shown from start_audio's answer): the microphone's statuses, what the
        lip-shape model could not do, and from a switch to a returned microphone, what
        reopening the devices found."""
        if isinstance(event, DeviceNotice) and event.device != "microphone":
            return
        message = event.message
        if message == STUCK_MESSAGE:
            self.tell(message, Severity.ERROR, key=SOUND_SERVER)
            return
        if message == self.engine.audio_problem:
            self._show_audio_state()
            return
        if isinstance(event, InputStatus) and event.kind in MIC_GOOD_NEWS:
            # Good news by its own kind: the engine may not hold the microphone yet, so
            # its status cannot be read back here ("Microphone 'system' is on" was shown
            # with the warning sign that way).
            self.tell(message, Severity.INFO, key=MIC, seconds=EVENT_SECONDS)
            return
        self.tell(message, key=MIC)
        self._show_mic_state()

    def _follow_returned_mic(self) -> None:
        if self.engine.switch_to_returned_mic():
            self._apply_mic_mute()
            self.outputs.connect_sources()
            self._show_audio_state()
            self._show_mic_state()

    def _follow_sound_server(self) -> None:
        """The sound server going and coming back, each said once (under AUDIO: the news
        that it is back replaces the message that sound is off)."""
        news = self.engine.follow_sound_server()
        if news is None:
            return
        self._apply_mic_mute()
        self.outputs.connect_sources()
        if self.engine.audio_problem is not None:
            self._show_audio_state()
        else:
            self.tell(news, Severity.INFO, key=AUDIO, seconds=EVENT_SECONDS)
        self._show_mic_state()

    def _follow_outputs(self) -> None:
        """An open output waiting for its peer or in trouble (VTube Studio not running,
        a refused send) is said, once per change, and the message goes once it is on.
        (One that could not open was told so when it was opened.)"""
        seen = set()
        for status in [output.status() for output in self.outputs.opened.values()]:
            seen.add(status.name)
            key = ("output", status.name)
            if status.state == "on":
                if self._output_news.pop(status.name, None) is not None:
                    self.forget(key)
                continue
            text = status.problem or status.detail
            if self._output_news.get(status.name) != text:
                self._output_news[status.name] = text
                self.tell(text, Severity.WARNING if status.state == "trouble" else Severity.INFO,
                          key=key)
        for name in set(self._output_news) - seen:  # closed since
            del self._output_news[name]
            self.forget(("output", name))

    def _follow_frame_rate(self) -> None:
        presenter = self._presenter()
        if presenter is None:
            return
        said = self._frame_rate_watch.update(time.monotonic(), presenter.measured_fps())
        if said:
            self.tell(said, key=FRAME_RATE)
        elif said == "":
            self.forget(FRAME_RATE)
        producers = [getattr(output, "presenter", None) for output in self.outputs.pullers()]
        overruns = sum(p.producer.overruns for p in producers
                       if p is not None and p.producer is not None)
        said = self._degraded_watch.update(time.monotonic(), overruns)
        if said:
            self.tell(said, key=DEGRADED)
        elif said == "":
            self.forget(DEGRADED)

    def _show_audio_state(self) -> None:
        """'Audio is off' while it is, and gone once audio is back."""
        problem = self.engine.audio_problem
        if problem is None:
            self.forget(AUDIO)
        else:
            self.tell(problem, Severity.ERROR, key=AUDIO)

    def _show_mic_state(self) -> None:
        """Good news about the microphone ("... is on", "... is back") is shown for a
        while, the rest until the next status. The engine reports a microphone's status
        before it holds that microphone, so this also runs after each engine call that
        may open one."""
        status = self.engine.mic.status if self.engine.mic is not None else None
        shown = next((m for m in self.messages.shown() if m.key == MIC), None)
        if (status is not None and shown is not None and shown.text == status.message
                and status.kind in MIC_GOOD_NEWS):
            self.tell(status.message, Severity.INFO, key=MIC, seconds=EVENT_SECONDS)

    # -- the avatar -----------------------------------------------------------------

    def load_avatar(self, manifest: str | None) -> AvatarRig | None:
        """Show the avatar at `manifest` (None: the bundled one); one that cannot be read
        is told and the bundled one shown instead."""
        self.forget(AVATAR)  # a new choice: what was said of the last one is over
        rig = self._read_rig(manifest)
        if rig is not None:
            self.show_rig(rig)
        return rig

    def show_rig(self, rig: AvatarRig) -> None:
        """Show `rig` in every output. Whatever chose it (a library choice, the API, the
        settings, an import), it is the newest choice: a library read still under way is
        for an older one and is not shown."""
        self._avatar_asked += 1
        self._avatar_reading = None
        self.rig = rig
        self.outputs.set_rig(rig)
        self.avatar_changed.emit()

    def _read_rig(self, manifest: str | None) -> AvatarRig | None:
        try:
            return read_avatar(manifest)
        except (RigError, PortraitError) as exc:
            if not manifest:
                self.tell(f"The bundled avatar is broken: {exc}", Severity.ERROR, key=AVATAR)
                return None
            self.tell(f"Avatar not loaded: {exc} Showing the bundled avatar instead.", key=AVATAR)
            return self._read_rig(None)

    def set_avatar(self, manifest: str | None, rig: AvatarRig | None = None) -> AvatarRig:
        """Make the avatar at `manifest` (None: the bundled one) the avatar and keep it in
        the settings; RigError or PortraitError, nothing changed, when it cannot be read.
        `rig`: that avatar read already (read_avatar, off this thread), else read here."""
        rig = rig if rig is not None else read_avatar(manifest)
        self.forget(AVATAR)
        self.settings = replace(self.settings, avatar_manifest=manifest)
        self.save_settings()
        if manifest and not is_picture(manifest):
            try:
                self.library.adopt(Path(manifest))  # a sprite rig chosen in the settings
            except OSError as exc:
                self.tell(f"The avatar library could not keep {manifest}: "
                          f"{exc.strerror or exc}.", key=LIBRARY)
        # Last: avatar_changed (from show_rig) is heard with the settings and library as they
        # are now, so the library view marks the new avatar.
        self.show_rig(rig)
        return rig

    def avatar_saved(self, manifest: str) -> None:
        """An avatar shown already (an import) is saved at `manifest`: it is the avatar in
        the settings now, and its voice (none of its own yet: the settings') speaks."""
        before = self.voice_choice()
        self.settings = replace(self.settings, avatar_manifest=manifest)
        self.save_settings()
        self.avatar_changed.emit()
        if self.voice_choice() != before:
            self.load_voice()

    def use_avatar(self, avatar: Avatar) -> None:
        """Show a library avatar (the view's choice, next/previous), with its own voice. It
        is read on the avatar reader, not on this (the GUI) thread, whose display ticks the
        read would hold up (43 ms for the bundled sprite rig, 90-140 ms for a photo one on
        the 2-vCPU VM), and set here once read (set_avatar) unless another avatar was chosen
        or shown meanwhile: the latest choice wins. One that cannot be read is told and the
        avatar stays as it was."""
        self._avatar_asked += 1
        self._avatar_reading = avatar
        self._avatar_reader.submit(self._read_avatar, self._avatar_asked, avatar)

    def _read_avatar(self, asked: int, avatar: Avatar) -> None:
        """On the avatar reader: read choice number `asked` and hand the rig, or the error
        reading it raised, to the studio's thread."""
        if asked != self._avatar_asked:
            return  # chosen over before its turn came: it would not be shown
        try:
            read: AvatarRig | Exception = read_avatar(avatar.setting)
        except Exception as exc:  # told, or raised, on the studio's thread
            read = exc
        self.call_soon(lambda: self._show_read_avatar(asked, avatar, read))

    def _show_read_avatar(self, asked: int, avatar: Avatar, read: AvatarRig | Exception) -> None:
        if asked != self._avatar_asked or self.closed.is_set():
            return  # another avatar was chosen or shown since, or nothing shows avatars now
        self._avatar_reading = None  # next/previous step from the avatar shown again
        if isinstance(read, (RigError, PortraitError)):
            self.tell(f"{avatar.name} could not be shown: {read.message} The avatar stays as "
                      "it was.", key=AVATAR)
            return
        if isinstance(read, Exception):
            raise read  # a bug, not the avatar's fault: it fails here, as when read here
        before = self.voice_choice()
        self.set_avatar(avatar.setting, read)
        if self.voice_choice() != before:
            self.load_voice()

    def voice_batch_sizes(self) -> tuple[int, ...]:
        """The batch sizes the voice's engines are built at: with the API on, those for
        its api_max_streams concurrent streams, which a GPU then runs together; else (1,),
        as the app speaks one stream at a time (each size is a graph per shape to warm)."""
        if self.api_port is None and not self.settings.api_enabled:
            return (1,)
        return batch_sizes_for(self.settings.api_max_streams)

    def voice_choice(self) -> tuple[str | None, int]:
        """(voice, speaker) of the avatar in use: its own, else the settings'."""
        return voice_of(self.library.in_use(self.settings.avatar_manifest),
                        self.settings.voice, self.settings.voice_speaker)

    def _on_avatar_window_closed(self) -> None:
        """The user closed the avatar window itself: it stays closed, next start too."""
        self.wants = replace(self.wants, window=None)
        self.apply(replace(self.settings, output_window=False))

    # -- settings -------------------------------------------------------------------

    def save_settings(self) -> None:
        try:
            self.store.save(self.settings)
        except OSError as exc:
            self.tell(f"The settings could not be saved to {self.store.path} ({exc.strerror}): "
                      "they apply now, and the file keeps the ones saved before.",
                      Severity.ERROR, key=SETTINGS_FILE)
            return
        for number in range(len(self.store.problems)):
            self.forget((SETTINGS_FILE, number))  # the file holds good values only now
        self.forget(SETTINGS_FILE)

    def set_latency_mode(self, mode: str) -> None:
        if mode not in MODE_NAMES:
            raise ValueError(f"{mode!r} is not a latency mode: use one of {', '.join(MODE_NAMES)}")
        self.apply(replace(self.settings, latency_mode=mode))

    def apply(self, settings: Settings) -> None:
        """Take new settings (saved), reopening only what they change."""
        old = self.settings
        self.settings = settings
        self.save_settings()
        if settings.latency_mode != old.latency_mode:
            # The speaker reads the mode at every chunk: a request that has not started
            # may have its first chunk made in either.
            self._request_modes = dict.fromkeys(self._request_modes)
        if settings.avatar_manifest != old.avatar_manifest:
            self.load_avatar(settings.avatar_manifest)
        if self.voice_choice() != voice_of(self.library.in_use(old.avatar_manifest), old.voice,
                                           old.voice_speaker) or (
                # On a GPU the API's streams share the voice's engines, so the voice is
                # warmed again at the sizes they now need (the CPU batches none).
                self.tts is not None and self.tts.on_device
                and self.tts.batch_sizes != self.voice_batch_sizes()):
            self.load_voice()
        sources = (self.engine.mouth, self.engine.clock)
        for problem in self.engine.apply(settings):
            # A message for each device that is off: the output's is the engine's audio
            # problem, shown below, so any other is the microphone's.
            if problem != self.engine.audio_problem:
                self.tell(problem, key=MIC)
        self._show_audio_state()
        if not settings.mic_enabled:
            self.forget(MIC)
        self._show_mic_state()
        if settings.hotkeys != old.hotkeys:
            self._bind_hotkeys(self.hotkeys.reconfigure(settings.hotkeys))
        self._apply_mic_mute()
        if (settings.target_fps, settings.software_gl_fps) != (old.target_fps, old.software_gl_fps):
            self.tell("The new frame rate takes effect when the app restarts.", Severity.INFO)
        if settings.inference_provider != old.inference_provider:
            self.tell("The new inference choice takes effect when the app restarts.", Severity.INFO)
        if settings.mouth_frames != old.mouth_frames:
            self.mouth_paths.set_setting(settings.mouth_frames)
            if self.rig is not None:
                self.outputs.set_rig(self.rig)  # each output chooses its path again
        if settings.output_window != old.output_window:
            self.wants = replace(self.wants, window=None)  # the user chose: the command line's word is over
        if (settings.browser_source, settings.browser_source_port) != (
                old.browser_source, old.browser_source_port):
            self.wants = replace(self.wants, browser_port=None)
        self.outputs.apply(settings, self.wants)
        # Reconnecting drops the frames made ahead: only when a device change gave the
        # mouth a new source or clock, not for every setting.
        if (self.engine.mouth, self.engine.clock) != sources:
            self.outputs.connect_sources()
        self.outputs_changed.emit()
        self.obs.apply(settings)
        self._apply_api()

    # -- the API --------------------------------------------------------------------

    def _apply_api(self) -> None:
        """Start, restart or stop the API server for the settings (and --api-port)."""
        from app.api.server import ApiConfig, ApiError, ApiServer

        settings = self.settings
        wanted = self.api_port is not None or settings.api_enabled
        config = ApiConfig.from_settings(settings, self.api_port) if wanted else None
        if self.api is not None and self.api.config == config:
            return
        if self.api is not None:
            self.api.close()
            self.api = None
        if config is None:
            self.forget(API)
            return
        server = ApiServer(self, config)
        try:
            server.start()
        except ApiError as exc:
            self.tell(f"The API is off: {exc}", Severity.ERROR, key=API)
            return
        self.api = server
        warning = config.warning()
        self.tell(f"API on {server.url}" + (f" — {warning}" if warning else ""),
                  Severity.WARNING if warning else Severity.INFO, key=API,
                  seconds=None if warning else EVENT_SECONDS)

    def ask_for_token(self, name: str) -> None:
        """An API client named `name` asks for a token: the user is asked (the window
        shows a dialog; headless prints how to answer)."""
        self.tell(f"The API client {name!r} asks to control Lipsync Studio: allow or deny it "
                  f"(with --headless: type /approve {name} or /deny {name}).",
                  key=("token", name))
        self.token_requested.emit(name)

    def decide_token(self, name: str, approve: bool) -> bool:
        """The user's answer to `name`'s request; False when none is waiting."""
        self.forget(("token", name))
        decided = self.api is not None and self.api.decide(name, approve)
        if decided:
            self.tell(f"{'Allowed' if approve else 'Denied'} the API client {name!r}.",
                      Severity.INFO, seconds=EVENT_SECONDS)
        return decided

    # -- what it shows --------------------------------------------------------------

    def _presenter(self):
        """The presenter whose log measures the A/V offset: the main window's view when
        there is one, else the first output that presents frames."""
        for output in self.outputs.pullers():
            presenter = getattr(output, "presenter", None)
            if presenter is not None:
                return presenter
        return None

    def sync_offsets(self):
        """Live A/V sync: viseme changes on screen against their onsets in the audio
        (None with no output presenting frames)."""
        presenter = self._presenter()
        if presenter is None:
            return None
        rows = presenter.presentation_log()
        rows = rows[rows["status"] == PRESENTED]
        times, visemes = self.engine.timeline.onsets()
        return viseme_change_offsets(rows["heard"], rows["viseme"], times, visemes, MATCH_WINDOW_S)

    def metrics(self) -> dict:
        """The figures the status line and the API's status show."""
        report = self.sync_offsets()
        presenter = self._presenter()
        stats = presenter.stats() if presenter is not None else {}
        stage = self.engine.mic_stage
        first = self.first_audio
        return {key: _plain(value) for key, value in {
            "heard_first_audio_ms": first.heard_ms if first is not None else None,
            "synthesis_first_audio_ms": first.synthesis_ms if first is not None else None,
            "first_audio_mode": first.mode if first is not None else None,
            "av_offset_ms": (report.median_ms if report is not None and len(report.offsets_ms)
                             else None),
            "presented_frames": stats.get("presented"),
            "late_frames": stats.get("late"),
            "fps": stats.get("fps"),
            "mic_to_mouth_ms": stage.latency().p99_ms if stage is not None else None,
            "obs_mic_sync_offset_ms": stage.sync_offset_ms if stage is not None else None,
        }.items()}

    def frame_counts(self) -> list[dict]:
        """What each output that pulls frames showed at its ticks, by its presenter's
        counters: presented, late (= held + interpolated), missed ticks (due ticks that
        passed with no frame: the display's grid points skipped), stalls (two or more of
        them in a row; busy stalls: those its ticking thread was on a CPU through), the
        longest gap between ticks overall and in the last minute, and its frame rate."""
        counts = []
        for output in self.outputs.pullers():
            # A pose output's presenter is its ticker's.
            presenter = getattr(output, "presenter", None) or getattr(
                getattr(output, "ticker", None), "presenter", None)
            if presenter is None:
                continue
            stats = presenter.stats()
            counts.append({"output": output.name,
                           **{key: _plain(stats[key]) for key in FRAME_COUNTS}})
        return counts

    def status(self) -> dict:
        """What the API's status reports: voice, speech, avatar, microphone, outputs,
        figures, each output's frame counts, the heaps and the messages shown now (JSON
        values only)."""
        mic, stage = self.engine.mic, self.engine.mic_stage
        speaker = self.engine.speaker
        output = self.engine.output
        return {
            "voice_ready": self.voice_ready_for_speech,
            "inference": self.inference,
            "speaking": speaker is not None and not speaker.idle,
            "latency_mode": self.settings.latency_mode,
            "avatar": {"name": self.rig.name if self.rig is not None else None,
                       "manifest": self.settings.avatar_manifest,
                       "expression": self.expression, "expressions": list(self.expressions)},
            "audio": ({"device": output.device_name, "sample_rate": output.sample_rate}
                      if output is not None else None),
            "mic": {"on": mic is not None, "device": mic.status.device if mic and mic.status else None,
                    "status": mic.status.kind if mic and mic.status else None,
                    "message": mic.status.message if mic and mic.status else None,
                    "text": stage.status_text() if stage is not None else None},
            "outputs": [{"name": s.name, "state": s.state, "detail": s.detail,
                         "problem": s.problem} for s in self.outputs.statuses()],
            "metrics": self.metrics(),
            "frames": self.frame_counts(),
            "heap": heap_figures(),
            "messages": [{"text": m.text, "severity": m.severity.value}
                         for m in self.messages.shown()],
        }


def _plain(value):
    """A figure as JSON takes it: numpy's numbers as Python's, NaN as None."""
    if value is None or isinstance(value, str):
        return value
    value = float(value)
    return None if value != value else (int(value) if value.is_integer() else value)
