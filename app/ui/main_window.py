"""The main window: the avatar, a text box (Enter speaks), Speak / Stop, live figures."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Hashable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.engine import Engine
from app.obs.live import ObsLive
from app.outputs import Outputs
from app.settings import Settings, SettingsStore
from app.ui.message_view import MessageArea, MessageHistory
from app.ui.messages import EVENT_SECONDS, MessageBoard, Severity
from app.ui.portrait_import import FacePicker, LandmarkOverlay, PortraitImporter
from app.ui.settings_panel import (
    HEARD_FIRST_AUDIO,
    SYNTHESIS_FIRST_AUDIO,
    SettingsPanel,
)
from app.ui.status_line import FirstAudio, status_line
from pipeline.audio.devices import STUCK_MESSAGE
from pipeline.core.events import (
    DeviceNotice,
    InputStatus,
    SpeechEvent,
    SpeechFailed,
    SpeechFinished,
    SpeechNotice,
    SpeechStarted,
)
from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
from pipeline.core.sync_metrics import viseme_change_offsets
from pipeline.face.landmarks import PortraitError
from render.gl.offscreen import OffscreenError, gl_renderer, renders_on_cpu
from render.outputs.avatar_view import PRESENTED, AvatarView
from render.rigs.loader import PICTURE_SUFFIXES, AvatarRig, is_picture, load_avatar_rig
from render.rigs.manifest import RigError

log = logging.getLogger(__name__)

STATUS_INTERVAL_MS = 500
METER_INTERVAL_MS = 50
METER_FLOOR_DB = -60
# Viseme changes further than this from any onset of that viseme are not lip-sync
# errors but something else (a held fallback, a cut): they are counted, not averaged.
MATCH_WINDOW_S = 0.1
PICTURE_FILTER = "Pictures ({})".format(" ".join("*" + suffix for suffix in PICTURE_SUFFIXES))
STATUS_FIRST_AUDIO_NOTE = (
    f"{HEARD_FIRST_AUDIO.capitalize()}: from Enter to the first sample at the sound card. "
    f"{SYNTHESIS_FIRST_AUDIO.capitalize()}: from Enter to the first sound synthesized, the "
    "figure that Settings shows for each latency mode.")

# What the window's messages about a condition are about (see app.ui.messages).
AUDIO = "audio"
MIC = "microphone"
SOUND_SERVER = "sound server"
VOICE = "voice"
AVATAR = "avatar"
PORTRAIT = "portrait"
FELL_BEHIND = "fell behind"
OBS = "obs"
INFERENCE = "inference"
SETTINGS_FILE = "settings file"
# Microphone statuses that are good news: shown for a while, not until the next status.
MIC_GOOD_NEWS = ("started", "recovered", "available")


class _Bridge(QObject):
    """Carries events from worker threads to the UI thread (queued signal delivery)."""

    speech = Signal(object)
    voice_progress = Signal(float)
    voice_loaded = Signal(object, object)
    voice_failed = Signal(str)
    mic_status = Signal(str)
    obs_message = Signal(str)


def _colour(hex_colour: str) -> tuple[float, float, float, float]:
    c = QColor(hex_colour)
    return (c.redF(), c.greenF(), c.blueF(), 1.0)


class MainWindow(QMainWindow):
    def __init__(self, store: SettingsStore, settings: Settings, *,
                 output_window: bool | None = None, browser_port: int | None = None) -> None:
        """`output_window` True opens the avatar-only window whatever the settings say
        (the command line's --output-window); `browser_port` serves the browser source
        there (--browser-source-port)."""
        super().__init__()
        self.setWindowTitle("Lipsync Studio")
        self.store = store
        self.settings = settings
        self._bridge = _Bridge()
        self._closed = threading.Event()
        self._bridge.speech.connect(self._on_speech_event)
        self._bridge.voice_progress.connect(self._on_voice_progress)
        self._bridge.voice_loaded.connect(self._on_voice_loaded)
        self._bridge.voice_failed.connect(self._on_voice_failed)
        self._bridge.mic_status.connect(self._on_engine_message)
        self._bridge.obs_message.connect(lambda message: self.tell(message, key=OBS))
        self.engine = Engine(settings)
        # From the engine's threads to this one, through the bridge's queued signals.
        self.engine.events.subscribe(self._bridge.speech.emit, SpeechStarted, SpeechFinished,
                                     SpeechNotice, SpeechFailed)
        self.engine.events.subscribe(self._mic_message, InputStatus, DeviceNotice)
        self.messages = MessageBoard()
        self._messages_shown = -1  # the board's version on screen
        self.message_area = MessageArea()
        self.history = MessageHistory(self)
        self.history_button = QPushButton()
        self.history_button.setToolTip("Every message since the app started, with its time")
        self.history_button.clicked.connect(self.open_history)
        for number, problem in enumerate(store.problems):
            self.tell(f"In {store.path}: {problem}", key=(SETTINGS_FILE, number))
        # The last speech's heard and synthesis first audio, and the mode it was said in.
        self.first_audio: FirstAudio | None = None
        # The latency mode of each request said and not started yet.
        self._request_modes: dict[int, str | None] = {}
        # The last finished request and the media time its sound ends at.
        self.finished: SpeechFinished | None = None
        self.mode_first_audio_ms: dict[str, float] = {}
        # Where the voice's inference runs, once it is loaded (Engine.inference_text).
        self.inference: str | None = None

        frame_rate = self._frame_rate(settings)
        self.view = AvatarView(fps=frame_rate, clear_color=_colour(settings.background))
        self.outputs = Outputs(self.engine, settings, self.tell, frame_rate=frame_rate)
        self.outputs.window_closed = self._on_avatar_window_closed
        self.obs = ObsLive(self.engine, settings, self._bridge.obs_message.emit)
        self.outputs.on_caption = self.obs.offer_caption
        self._output_window = output_window
        self._browser_port = browser_port
        self.view.set_idle_motion(blinking=settings.blinking, breathing=settings.breathing)
        self.view.setMinimumSize(480, 480)
        self.text = QLineEdit()
        self.text.setPlaceholderText("Type what the avatar should say, then press Enter")
        self.text.returnPressed.connect(self.speak)
        self.speak_button = QPushButton("Speak")
        self.speak_button.clicked.connect(self.speak)
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop)
        self.settings_button = QPushButton("Settings…")
        self.settings_button.clicked.connect(self.open_settings)
        self.import_button = QPushButton("Import portrait…")
        self.import_button.setToolTip("Make any face picture (PNG or JPEG) the avatar; "
                                      "you can also drop a picture on the window.")
        self.import_button.clicked.connect(self.choose_portrait)
        self.avatar_window_button = QPushButton("Avatar window")
        self.avatar_window_button.setCheckable(True)
        self.avatar_window_button.setToolTip(
            "A window with the avatar alone, for OBS's window capture (Lipsync Studio — Avatar)")
        self.avatar_window_button.toggled.connect(self._toggle_avatar_window)
        self.landmarks = LandmarkOverlay(self.view)
        self.face_picker: FacePicker | None = None
        self.importer = PortraitImporter(store.path.parent / "avatars", self)
        self.importer.imported.connect(self._on_portrait_imported)
        self.importer.saved.connect(self._on_portrait_saved)
        self.importer.several_faces.connect(self._on_several_faces)
        self.importer.failed.connect(
            lambda message: self.tell(message, key=PORTRAIT, seconds=EVENT_SECONDS))
        self.setAcceptDrops(True)
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setFormat("Warming up the voice… %p%")
        self.progress.setTextVisible(True)
        self.mic_level = QProgressBar()
        self.mic_level.setRange(METER_FLOOR_DB, 0)
        self.mic_level.setFormat("mic %v dBFS")
        self.mic_level.setTextVisible(True)
        self.status = QLabel()
        # Wrapped so changing figures never widen the window and shift the avatar.
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setToolTip(STATUS_FIRST_AUDIO_NOTE)
        # A fixed height: figures coming and going must never resize (and move) the
        # avatar. The longest status (the mic's figures with an offset change) wraps to
        # four lines in a window 640 px wide.
        self.status.setFixedHeight(4 * self.fontMetrics().lineSpacing() + 4)

        controls = QHBoxLayout()
        controls.addWidget(self.text, 1)
        controls.addWidget(self.speak_button)
        controls.addWidget(self.stop_button)
        controls.addWidget(self.settings_button)
        controls.addWidget(self.import_button)
        controls.addWidget(self.avatar_window_button)
        controls.addWidget(self.mic_level)
        layout = QVBoxLayout()
        layout.addWidget(self.view, 1)
        layout.addLayout(controls)
        layout.addWidget(self.progress)
        messages = QHBoxLayout()
        messages.addWidget(self.message_area, 1)
        messages.addWidget(self.history_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(messages)
        layout.addWidget(self.status)
        central = QWidget()
        central.setLayout(layout)
        self.setCentralWidget(central)

        self._load_avatar(settings.avatar_manifest)
        self._start_audio()
        self._apply_outputs()
        self._status_timer = QTimer(self)
        self._status_timer.timeout.connect(self._follow_returned_mic)
        self._status_timer.timeout.connect(self.refresh_status)
        self._status_timer.timeout.connect(self._show_messages)  # let expired ones go
        self._status_timer.start(STATUS_INTERVAL_MS)
        self._meter_timer = QTimer(self)
        self._meter_timer.timeout.connect(self.refresh_meter)
        self._meter_timer.start(METER_INTERVAL_MS)
        self._set_ready(False)
        threading.Thread(target=self._load_voice, name="voice-loader", daemon=True).start()
        self._show_messages()

    # -- start-up -----------------------------------------------------------------

    def _frame_rate(self, settings: Settings) -> int:
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
        message = (f"OpenGL draws on the CPU here ({renderer}): the avatar is shown at "
                   f"{settings.software_gl_fps} fps, not {settings.target_fps}, so that the voice "
                   "keeps its share of the CPU ('Frame rate with software OpenGL' in Settings).")
        self.tell(message, Severity.INFO)
        return settings.software_gl_fps

    def _load_voice(self) -> None:
        try:
            # A window closed while its voice loads stops the warm-up at the next shape:
            # seconds of synthesis nobody would hear, on a core the rest of the process
            # (or, in the test suite, the next test) needs.
            tts = Engine.load_voice(self._bridge.voice_progress.emit,
                                    self.settings.inference_provider, self._closed)
            if tts is None:
                return
            self._bridge.voice_loaded.emit(tts, Engine.measure_modes(tts))
        except Exception as exc:  # shown to the user; the window stays usable
            if self._closed.is_set():
                return  # the window went away while the voice loaded: nobody to tell
            log.exception("voice failed to load")
            self._bridge.voice_failed.emit(f"The voice could not be loaded: {exc}")

    def _on_voice_progress(self, fraction: float) -> None:
        self.progress.setValue(round(fraction * 100))

    def _on_voice_loaded(self, tts, measured: dict[str, float]) -> None:
        if self._closed.is_set():
            # Closed after the warm-up: checked here, on the thread that closes windows,
            # so no voice reaches a closed window's engine.
            tts.close()
            return
        self.mode_first_audio_ms = measured
        self.engine.attach_voice(tts)
        self.outputs.attach_voice(tts)
        text, fell_back = Engine.inference_text(tts)
        self.inference = text
        if fell_back:
            self.tell(text, key=INFERENCE)
        self._set_ready(True)

    def _on_voice_failed(self, message: str) -> None:
        self.progress.hide()
        self.tell(message, Severity.ERROR, key=VOICE)

    def _set_ready(self, ready: bool) -> None:
        self.progress.setVisible(not ready)
        self.speak_button.setEnabled(ready)

    def _start_audio(self) -> None:
        self.engine.start_audio()
        self._show_audio_state()
        problem = self.engine.start_mic()
        if problem:
            self.tell(problem, key=MIC)
        self._show_mic_state()
        self._connect_view()

    def _follow_returned_mic(self) -> None:
        if self.engine.switch_to_returned_mic():
            self._connect_view()
            self._show_audio_state()
            self._show_mic_state()

    def _show_audio_state(self) -> None:
        """'Audio is off' while it is, and gone once audio is back."""
        problem = self.engine.audio_problem
        if problem is None:
            self.forget(AUDIO)
        else:
            self.tell(problem, Severity.ERROR, key=AUDIO)

    def _mic_message(self, event: InputStatus | DeviceNotice) -> None:
        """On the engine's threads: the microphone's news, and what the engine says of
        the microphone (an output's is shown from start_audio's answer)."""
        if isinstance(event, InputStatus) or event.device == "microphone":
            self._bridge.mic_status.emit(event.message)

    def _on_engine_message(self, message: str) -> None:
        """The engine's messages as things happen: the microphone's statuses, what the
        lip-shape model could not do, and from a switch to a returned microphone, what
        reopening the devices found."""
        if message == STUCK_MESSAGE:
            self.tell(message, Severity.ERROR, key=SOUND_SERVER)
            return
        if message == self.engine.audio_problem:
            self._show_audio_state()
            return
        self.tell(message, key=MIC)
        self._show_mic_state()

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

    def _connect_view(self) -> None:
        source, version = self.engine.mouth_source()
        self.view.set_sources(source, self.engine.clock.media_time_at, version)
        self.outputs.connect_sources()

    def _load_avatar(self, manifest: str | None) -> None:
        self.forget(AVATAR)  # a new choice: what was said of the last one is over
        rig = self._read_rig(manifest)
        if rig is not None:
            self.view.set_rig(rig)
            self.outputs.set_rig(rig)

    def _read_rig(self, manifest: str | None) -> AvatarRig | None:
        path = Path(manifest) if manifest else DEFAULT_AVATAR_MANIFEST
        try:
            return load_avatar_rig(path)
        except (RigError, PortraitError) as exc:
            if not manifest:
                self.tell(f"The bundled avatar is broken: {exc}", Severity.ERROR, key=AVATAR)
                return None
            self.tell(f"Avatar not loaded: {exc} Showing the bundled avatar instead.", key=AVATAR)
            return self._read_rig(None)

    # -- portraits ------------------------------------------------------------------

    def choose_portrait(self) -> None:
        self.importer.prepare()
        path, _ = QFileDialog.getOpenFileName(self, "Import portrait", "", PICTURE_FILTER)
        if path:
            self.import_portrait(path)

    def import_portrait(self, path: str | Path, face_index: int | None = None) -> None:
        """Make the face in the picture at `path` the avatar (in the background)."""
        if not self.importer.start(path, face_index):
            self.tell("A portrait is already being imported; try again in a moment.",
                      Severity.INFO)
            return
        self.tell(f"Finding the face in {Path(path).name}…", Severity.INFO, key=PORTRAIT)

    def _on_several_faces(self, path: str, image, boxes) -> None:
        self.tell(f"{Path(path).name} shows {len(boxes)} faces: choose the one that talks.",
                  Severity.INFO, key=PORTRAIT, seconds=EVENT_SECONDS)
        self.face_picker = FacePicker(Path(path).name, image, boxes, self)
        self.face_picker.chosen.connect(lambda index: self.import_portrait(path, index))
        self.face_picker.open()

    def _on_portrait_imported(self, rig, seconds: float) -> None:
        self.view.set_rig(rig)
        self.outputs.set_rig(rig)
        self.landmarks.show_for(rig)
        self.forget(AVATAR)
        self.tell(f"{rig.name} is the avatar now (face found and rigged in {seconds:.2f} s).",
                  Severity.INFO, key=PORTRAIT, seconds=EVENT_SECONDS)

    def _on_portrait_saved(self, rig, manifest: str) -> None:
        # Straight into the settings (not through apply_settings): the rig is on screen.
        self.settings = replace(self.settings, avatar_manifest=manifest)
        self._save_settings()
        log.info("photo avatar %s saved as %s", rig.name, manifest)

    def dragEnterEvent(self, event) -> None:
        if self._dropped_files(event):
            event.acceptProposedAction()
            self.importer.prepare()

    def dropEvent(self, event) -> None:
        files = self._dropped_files(event)
        if not files:
            return
        event.acceptProposedAction()
        pictures = [f for f in files if is_picture(f)]
        if pictures:
            self.import_portrait(pictures[0])
        else:
            self.tell(f"{Path(files[0]).name} is not a picture: drop a PNG or JPEG portrait to "
                      "make it the avatar.")

    @staticmethod
    def _dropped_files(event) -> list[str]:
        return [url.toLocalFile() for url in event.mimeData().urls() if url.isLocalFile()]

    # -- actions --------------------------------------------------------------------

    def speak(self) -> None:
        text = self.text.text()
        if not self.engine.voice_ready_for_speech():
            self.tell("The voice is still loading; try again in a moment.", Severity.INFO)
            return
        if not text.strip():
            self.tell("Nothing to speak: type some text first.")
            return
        self._request_modes[self.engine.say(text)] = self.settings.latency_mode

    def stop(self) -> None:
        self.engine.stop()
        self.outputs.speech_stopped()

    def open_settings(self) -> None:
        panel = SettingsPanel(self.settings, self.mode_first_audio_ms, self)
        if panel.exec():
            self.apply_settings(panel.result_settings())

    def apply_settings(self, settings: Settings) -> None:
        old = self.settings
        self.settings = settings
        self._save_settings()
        if settings.latency_mode != old.latency_mode:
            # The speaker reads the mode at every chunk: a request that has not started
            # may have its first chunk made in either.
            self._request_modes = dict.fromkeys(self._request_modes)
        if settings.avatar_manifest != old.avatar_manifest:
            self._load_avatar(settings.avatar_manifest)
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
        # Reconnecting drops the frames made ahead: only when a device change gave the
        # mouth a new source or clock, not for every setting.
        if (self.engine.mouth, self.engine.clock) != sources:
            self._connect_view()
        self.view.set_idle_motion(blinking=settings.blinking, breathing=settings.breathing)
        if settings.background != old.background:
            self.view.set_clear_color(_colour(settings.background))
        if (settings.target_fps, settings.software_gl_fps) != (old.target_fps, old.software_gl_fps):
            self.tell("The new frame rate takes effect when the app restarts.", Severity.INFO)
        if settings.inference_provider != old.inference_provider:
            self.tell("The new inference choice takes effect when the app restarts.", Severity.INFO)
        if settings.output_window != old.output_window:
            self._output_window = None  # the user chose here: the command line's word is over
        if (settings.browser_source, settings.browser_source_port) != (
                old.browser_source, old.browser_source_port):
            self._browser_port = None
        self._apply_outputs()
        self.obs.apply(settings)

    # -- outputs --------------------------------------------------------------------

    def _apply_outputs(self) -> None:
        self.outputs.apply(self.settings, window=self._output_window,
                           browser_port=self._browser_port)
        # The button shows what is open, without toggling it again.
        self.avatar_window_button.blockSignals(True)
        self.avatar_window_button.setChecked(self.outputs.avatar_window is not None)
        self.avatar_window_button.blockSignals(False)

    def _toggle_avatar_window(self, on: bool) -> None:
        self._output_window = None
        self.settings = replace(self.settings, output_window=on)
        self._save_settings()
        self._apply_outputs()

    def _on_avatar_window_closed(self) -> None:
        """The user closed the avatar window itself: it stays closed, next start too."""
        self._toggle_avatar_window(False)

    # -- events and status ----------------------------------------------------------

    def _on_speech_event(self, event: SpeechEvent) -> None:
        if isinstance(event, SpeechStarted):
            self.first_audio = FirstAudio(event.first_audio_s * 1000, event.synthesis_s * 1000,
                                          self._request_modes.pop(event.request, None))
        elif isinstance(event, SpeechFinished):
            self.finished = event
        elif isinstance(event, (SpeechNotice, SpeechFailed)):
            self.tell(event.message)
        if isinstance(event, (SpeechFinished, SpeechFailed)):  # either ends a request
            self._request_modes.pop(event.request, None)
        if isinstance(event, SpeechFinished) and (event.gaps or event.underruns):
            self.tell(
                f"Synthesis fell behind playback: {event.gaps} longer pause(s) between "
                f"sentences, {event.underruns} chunk(s) too late to play in full. A faster "
                "latency mode or a less busy computer helps.",
                key=FELL_BEHIND, seconds=EVENT_SECONDS)

    # -- messages -------------------------------------------------------------------

    def tell(self, message: str, severity: Severity = Severity.WARNING, *,
             key: Hashable | None = None, seconds: float | None = None) -> None:
        """Show the user `message` (see MessageBoard.post for `key` and `seconds`)."""
        log.info("message (%s): %s", severity.value, message)
        self.messages.post(message, severity, key=key, seconds=seconds)
        self._show_messages()

    def forget(self, key: Hashable) -> None:
        """The condition `key` is over: its message goes."""
        if self.messages.clear(key):
            self._show_messages()

    @property
    def notices(self) -> list[str]:
        """Every message told since start, oldest first."""
        return [message.text for message in self.messages.history()]

    def _save_settings(self) -> None:
        self.store.save(self.settings)
        for number in range(len(self.store.problems)):
            self.forget((SETTINGS_FILE, number))  # the file holds good values only now

    def _show_messages(self) -> None:
        self.messages.expire()
        if self.messages.version == self._messages_shown:
            return
        self._messages_shown = self.messages.version
        self.message_area.show_messages(self.messages.shown())
        history = self.messages.history()
        self.history_button.setText(f"History ({len(history)})…")
        if self.history.isVisible():
            self.history.show_history(history)

    def open_history(self) -> None:
        self.history.show_history(self.messages.history())
        self.history.show()
        self.history.raise_()

    def sync_offsets(self):
        """Live A/V sync: viseme changes on screen against their onsets in the audio."""
        rows = self.view.presentation_log()
        rows = rows[rows["status"] == PRESENTED]
        times, visemes = self.engine.timeline.onsets()
        return viseme_change_offsets(rows["heard"], rows["viseme"], times, visemes, MATCH_WINDOW_S)

    def refresh_meter(self) -> None:
        mic = self.engine.mic
        if mic is None:
            self.mic_level.setValue(METER_FLOOR_DB)
            self.mic_level.setFormat("mic off")
            return
        peak = mic.level().peak_db
        self.mic_level.setFormat("mic %v dBFS")
        self.mic_level.setValue(max(METER_FLOOR_DB, min(0, round(peak))))

    def refresh_status(self) -> None:
        report = self.sync_offsets()
        output, stage = self.engine.output, self.engine.mic_stage
        self.status.setText(status_line(
            self.first_audio, report.median_ms if len(report.offsets_ms) else None,
            self.view.stats(),
            (output.device_name, output.sample_rate) if output is not None else None,
            stage.status_text() if stage is not None else None))

    def closeEvent(self, event) -> None:
        self._closed.set()
        self._status_timer.stop()
        self._meter_timer.stop()
        self.importer.close()
        self.view.shutdown()
        self.outputs.close()
        self.obs.close()
        self.engine.close()
        super().closeEvent(event)


def run_app(argv: list[str] | None = None, *, output_window: bool | None = None,
            browser_port: int | None = None) -> int:
    app = QApplication.instance() or QApplication(argv or sys.argv)
    app.setApplicationName("Lipsync Studio")
    store = SettingsStore()
    settings = store.load()
    window = MainWindow(store, settings, output_window=output_window, browser_port=browser_port)
    window.resize(720, 820)
    window.show()
    return app.exec()
