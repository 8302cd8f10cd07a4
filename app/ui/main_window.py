"""The main window: the avatar, a text box (Enter speaks), Speak / Stop, live figures.

A thin front end over a Studio (app/studio.py), which owns the engine, outputs, OBS link,
voice and API: the window shows the avatar (its view is one more output of the studio's),
the studio's messages and figures, and turns what the user does into studio calls.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QIcon
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.heap import freeze_long_lived
from app.hotkeys import install_window_shortcuts
from app.messages import EVENT_SECONDS, Severity
from app.outputs import Wants
from app.settings import Settings, SettingsStore
from app.studio import Studio
from app.ui import window_place
from app.ui.avatar_only import AvatarOnly
from app.ui.expression_picker import ExpressionPicker
from app.ui.hotkey_editor import HotkeyEditor
from app.ui.library_view import LibraryView
from app.ui.message_view import MessageArea, MessageHistory
from app.ui.mic_meter import MicMeter
from app.ui.portrait_import import FacePicker, LandmarkOverlay, PortraitImporter
from app.ui.queue_view import QueueView
from app.ui.settings_panel import HOTKEYS, VOICE, SettingsPanel
from app.ui.status_label import StatusLabel
from app.ui.status_line import status_line
from app.ui.text_entry import TextEntry
from app.ui.voices_box import VoicesBox
from pipeline.core.resources import APP_ID, ICONS_DIR
from pipeline.text.input import TextInputError
from render.outputs.avatar_view import AvatarView
from render.rigs.loader import PICTURE_SUFFIXES, is_picture

log = logging.getLogger(__name__)

STATUS_INTERVAL_MS = 500
METER_INTERVAL_MS = 50
# The smallest avatar view: room for the controls at a narrow width (480 px) and a
# short screen (720 px), the avatar still as tall as a hand.
VIEW_MINIMUM = (160, 160)
TITLE = "Lipsync Studio"
PICTURE_FILTER = "Pictures ({})".format(" ".join("*" + suffix for suffix in PICTURE_SUFFIXES))
# What the window's own messages are about (the studio's are in app.studio).
PORTRAIT = "portrait"


def _colour(hex_colour: str) -> tuple[float, float, float, float]:
    c = QColor(hex_colour)
    return (c.redF(), c.greenF(), c.blueF(), 1.0)


class MainWindow(QMainWindow):
    def __init__(self, store: SettingsStore, settings: Settings, *,
                 output_window: bool | None = None, browser_port: int | None = None,
                 api_port: int | None = None) -> None:
        """`output_window` True opens the avatar-only window whatever the settings say
        (the command line's --output-window); `browser_port` serves the browser source
        there (--browser-source-port); `api_port` the API (--api-port)."""
        super().__init__()
        self.setWindowTitle(TITLE)
        self.studio = Studio(store, settings, wants=Wants(output_window, browser_port),
                             api_port=api_port)
        self.studio.on_message = lambda _message: self._show_messages()
        self.studio.voice_progress.connect(self._on_voice_progress)
        self.studio.voice_ready.connect(lambda: self._set_ready(True))
        self.studio.outputs_changed.connect(self._show_avatar_window_button)
        # The studio changes settings itself too (the avatar window closed by hand).
        self.studio.outputs_changed.connect(self._show_settings)
        self.studio.token_requested.connect(self._ask_for_token)
        self.token_requests: dict[str, QMessageBox] = {}
        self._messages_shown = -1  # the board's version on screen
        self.message_area = MessageArea()
        self.history = MessageHistory(self)
        self.history_button = QPushButton()
        self.history_button.setToolTip("Every message since the app started, with its time")
        self.history_button.clicked.connect(self.open_history)

        self.view = AvatarView(fps=self.studio.frame_rate, clear_color=_colour(settings.background),
                               mouth_paths=self.studio.mouth_paths)
        self.view.setMinimumSize(*VIEW_MINIMUM)
        self.text = TextEntry()
        self.text.setPlaceholderText("Type what the avatar should say, then press Enter "
                                     "(Up: lines said before)")
        self.text.submitted.connect(lambda _text: self.speak())
        self.speak_button = QPushButton("Speak")
        self.speak_button.clicked.connect(self.speak)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop speaking and drop the lines waiting in the queue")
        self.stop_button.clicked.connect(self.stop)
        self.queue_view = QueueView(self.studio.queue)
        self.queue_view.keep_on_screen(settings.speech_queue == "queue")
        self.studio.queue.changed = self.queue_view.refresh
        self.settings_button = QPushButton("Settings…")
        self.settings_panel: SettingsPanel | None = None
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
        self.importer = PortraitImporter(self.studio.library, self)
        self.importer.imported.connect(self._on_portrait_imported)
        self.importer.saved.connect(self._on_portrait_saved)
        self.importer.several_faces.connect(self._on_several_faces)
        self.importer.failed.connect(
            lambda message: self.tell(message, key=PORTRAIT, seconds=EVENT_SECONDS))
        self.library_view = LibraryView(self.studio.library, settings.avatar_manifest)
        self.library_view.chosen.connect(self.studio.use_avatar)
        self.library_view.voice_changed.connect(self._on_avatar_voice_changed)
        self.library_view.told.connect(
            lambda text, severity: self.tell(text, severity, seconds=EVENT_SECONDS))
        self.studio.avatar_changed.connect(self._show_settings)
        self.studio.avatar_changed.connect(
            lambda: self.library_view.set_in_use(self.settings.avatar_manifest))
        self.library_dialog = QDialog(self)
        self.library_dialog.setWindowTitle("Avatars")
        QVBoxLayout(self.library_dialog).addWidget(self.library_view)
        self.library_button = QPushButton("Avatars…")
        self.library_button.setToolTip("Every avatar you imported or added: switch, rename, "
                                       "delete, give each its voice")
        self.library_button.clicked.connect(self.library_dialog.show)
        self.expression_picker = ExpressionPicker(self.studio)
        self.setAcceptDrops(True)
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setFormat("Warming up the voice… %p%")
        self.progress.setTextVisible(True)
        self.mic_level = MicMeter()
        self.status = StatusLabel()

        # The text box has a row of its own but for Speak and Stop, so a sentence can be
        # read while it is typed at any width; the rest go to a second row.
        speech = QHBoxLayout()
        speech.addWidget(self.text, 1)
        speech.addWidget(self.speak_button)
        speech.addWidget(self.stop_button)
        # The avatar's own controls in a row of theirs, so the window still fits 480 px.
        avatar = QHBoxLayout()
        avatar.addWidget(self.import_button)
        avatar.addWidget(self.library_button)
        avatar.addWidget(self.expression_picker)
        avatar.addWidget(self.avatar_window_button)
        avatar.addStretch(1)
        tools = QHBoxLayout()
        tools.addWidget(self.settings_button)
        tools.addWidget(self.mic_level, 1)
        messages = QHBoxLayout()
        messages.addWidget(self.message_area, 1)
        messages.addWidget(self.history_button, 0, Qt.AlignmentFlag.AlignTop)
        below = QVBoxLayout()
        below.setContentsMargins(0, 0, 0, 0)
        below.addLayout(speech)
        below.addLayout(avatar)
        below.addLayout(tools)
        below.addWidget(self.queue_view)
        below.addWidget(self.progress)
        below.addLayout(messages)
        below.addWidget(self.status)
        self.controls = QWidget()
        self.controls.setLayout(below)
        self._layout = QVBoxLayout()
        self._layout.addWidget(self.view, 1)
        self._layout.addWidget(self.controls)
        central = QWidget()
        central.setLayout(self._layout)
        self.setCentralWidget(central)
        self.avatar_only = AvatarOnly(self, self.controls, self._layout)
        self.avatar_only.show_hidden(settings.window_controls_hidden)
        self.avatar_only.changed.connect(lambda hidden: self.apply_settings(
            replace(self.settings, window_controls_hidden=hidden)))
        window_place.place(self, settings.window_geometry)

        self.window_shortcuts = None
        self.studio.hotkeys_in_window = True
        self.studio.hotkeys_changed.connect(self._follow_hotkeys)
        self.studio.outputs.attach(self.view)
        self.studio.start()
        self._status_timer = QTimer(self)
        self._status_timer.timeout.connect(self.refresh_status)
        self._status_timer.start(STATUS_INTERVAL_MS)
        self._meter_timer = QTimer(self)
        self._meter_timer.timeout.connect(self.refresh_meter)
        self._meter_timer.start(METER_INTERVAL_MS)
        self._set_ready(False)
        self._show_messages()
        # Filled at once, not at the first tick: blank for 0.5 s, the line then wrapped and
        # the avatar above it moved (419 -> 405 px at the speech queue test's width).
        self.refresh_status()

    # -- the studio, as tests and the settings panel see it -------------------------

    @property
    def engine(self):
        return self.studio.engine

    @property
    def outputs(self):
        return self.studio.outputs

    @property
    def obs(self):
        return self.studio.obs

    @property
    def store(self) -> SettingsStore:
        return self.studio.store

    @property
    def settings(self) -> Settings:
        return self.studio.settings

    @property
    def messages(self):
        return self.studio.messages

    @property
    def inference(self) -> str | None:
        return self.studio.inference

    @property
    def mode_first_audio_ms(self) -> dict[str, float]:
        return self.studio.mode_first_audio_ms

    @property
    def first_audio(self):
        return self.studio.first_audio

    @first_audio.setter
    def first_audio(self, value) -> None:
        self.studio.first_audio = value

    @property
    def finished(self):
        return self.studio.finished

    @finished.setter
    def finished(self, value) -> None:
        self.studio.finished = value

    # -- start-up -----------------------------------------------------------------

    def _on_voice_progress(self, fraction: float) -> None:
        # Shown again for a voice loading after start (another voice chosen) until ready.
        self.progress.setVisible(True)
        self.progress.setValue(round(fraction * 100))
        if self.settings_panel is not None:
            self.settings_panel.show_voice_progress(fraction)

    def _set_ready(self, ready: bool) -> None:
        self.progress.setVisible(not ready)
        self.speak_button.setEnabled(ready)
        if ready and self.settings_panel is not None:
            self.settings_panel.show_voice_progress(None)
            self.settings_panel.show_first_audio(self.studio.mode_first_audio_ms)

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
        self.studio.forget("avatar")
        self.studio.show_rig(rig)
        self.landmarks.show_for(rig)
        how = "its rig from before, loaded" if self.importer.reused else "face found and rigged"
        self.tell(f"{rig.name} is the avatar now ({how} in {seconds:.2f} s).",
                  Severity.INFO, key=PORTRAIT, seconds=EVENT_SECONDS)

    def _on_portrait_saved(self, rig, manifest: str) -> None:
        # Straight into the settings (not through apply_settings): the rig is on screen.
        self.studio.avatar_saved(manifest)
        log.info("photo avatar %s saved as %s", rig.name, manifest)

    def _on_avatar_voice_changed(self, avatar) -> None:
        if avatar == self.studio.library.in_use(self.settings.avatar_manifest):
            self.studio.load_voice()

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
        if not self.studio.voice_ready_for_speech:
            self.tell("The voice is still loading; try again in a moment.", Severity.INFO)
            return
        if not text.strip():
            self.tell("Nothing to speak: type some text first.")
            return
        try:
            if self.studio.say(text) is not None:
                self.text.accept_line(text)
        except TextInputError as exc:  # what is being said goes on
            self.tell(str(exc), Severity.INFO, seconds=EVENT_SECONDS)

    def stop(self) -> None:
        self.studio.stop()

    def open_settings(self) -> SettingsPanel:
        """The settings panel, beside the window (not modal): each edit applies as it is
        made, through apply_settings."""
        if self.settings_panel is None:
            self.settings_panel = SettingsPanel(lambda: self.settings,
                                                self.studio.mode_first_audio_ms, self,
                                                shown_fps=self.studio.frame_rate)
            self.settings_panel.changed.connect(self.apply_settings)
            self.settings_panel.add_section(VOICE, VoicesBox(lambda: self.settings))
            self.hotkey_editor = HotkeyEditor(lambda: self.settings, self.studio.expressions)
            # Keys pressed to set a hotkey must not also do what they are bound to now.
            self.hotkey_editor.capturing.connect(
                lambda on: setattr(self.studio.hotkeys, "paused", on))
            self.hotkey_editor.show_problems(self.studio.hotkey_problems)
            self.settings_panel.add_section(HOTKEYS, self.hotkey_editor)
        elif not self.settings_panel.isVisible():
            self.settings_panel.refresh_devices()
        self.settings_panel.show_settings(self.settings)
        self.settings_panel.show()
        self.settings_panel.raise_()
        self.settings_panel.activateWindow()
        return self.settings_panel

    def apply_settings(self, settings: Settings) -> None:
        """The one way settings change while the app runs (the panel's edits, the
        window's own buttons): the studio takes them, and the panel shows them."""
        old = self.settings
        self.studio.apply(settings)
        if settings.background != old.background:
            self.view.set_clear_color(_colour(settings.background))
        if settings.speech_queue != old.speech_queue:
            self.queue_view.keep_on_screen(settings.speech_queue == "queue")
        self._show_settings()

    def _show_settings(self) -> None:
        if self.settings_panel is not None:
            self.settings_panel.show_settings(self.settings)
            self.hotkey_editor.show_expressions(self.studio.expressions)

    def _follow_hotkeys(self) -> None:
        """Where the desktop lets no program hear keys pressed in another (Wayland), the
        hotkeys are the window's own shortcuts, bound anew with each change."""
        if self.window_shortcuts is not None:
            self.window_shortcuts.remove()
            self.window_shortcuts = None
        if not self.studio.hotkeys.is_global:
            self.window_shortcuts = install_window_shortcuts(self, self.settings.hotkeys,
                                                             self.studio.do_action)
        if self.settings_panel is not None:
            self.hotkey_editor.show_problems(self.studio.hotkey_problems)

    # -- the avatar window ------------------------------------------------------------

    def _show_avatar_window_button(self) -> None:
        # The button shows what is open, without toggling it again.
        self.avatar_window_button.blockSignals(True)
        self.avatar_window_button.setChecked(self.outputs.avatar_window is not None)
        self.avatar_window_button.blockSignals(False)

    def _toggle_avatar_window(self, on: bool) -> None:
        self.studio.wants = replace(self.studio.wants, window=None)
        self.apply_settings(replace(self.settings, output_window=on))

    # -- the API --------------------------------------------------------------------

    def _ask_for_token(self, name: str) -> None:
        """An API client asks to control the app: Allow or Deny, without blocking the
        window (VTube Studio's plugin prompt)."""
        box = QMessageBox(QMessageBox.Icon.Question, "Allow an API client?",
                          f"“{name}” asks to control Lipsync Studio through its API: to speak, "
                          "stop, change the latency mode and the avatar, and follow what it "
                          "says.\n\nAllow it only if you started that program.",
                          QMessageBox.StandardButton.NoButton, self)
        allow = box.addButton("Allow", QMessageBox.ButtonRole.AcceptRole)
        box.addButton("Deny", QMessageBox.ButtonRole.RejectRole)
        box.setModal(False)

        def answered(button) -> None:
            self.token_requests.pop(name, None)
            self.studio.decide_token(name, button is allow)

        box.buttonClicked.connect(answered)
        self.token_requests[name] = box
        box.show()

    # -- messages -------------------------------------------------------------------

    def tell(self, message: str, severity: Severity = Severity.WARNING, *,
             key=None, seconds: float | None = None) -> None:
        """Show the user `message` (see MessageBoard.post for `key` and `seconds`)."""
        self.studio.tell(message, severity, key=key, seconds=seconds)

    @property
    def notices(self) -> list[str]:
        """Every message told since start, oldest first."""
        return [message.text for message in self.messages.history()]

    def _show_messages(self) -> None:
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
        return self.studio.sync_offsets()

    def refresh_meter(self) -> None:
        mic = self.engine.mic
        self.mic_level.show_level(mic.level().peak_db if mic is not None else None)

    def refresh_status(self) -> None:
        report = self.sync_offsets()
        output, stage = self.engine.output, self.engine.mic_stage
        self.status.setText(status_line(
            self.first_audio, report.median_ms if len(report.offsets_ms) else None,
            self.view.stats(),
            (output.device_name, output.sample_rate) if output is not None else None,
            stage.status_text() if stage is not None else None))

    def closeEvent(self, event) -> None:
        if self.settings_panel is not None:
            self.settings_panel.close()
        self._status_timer.stop()
        self._meter_timer.stop()
        self.importer.close()
        self.view.shutdown()
        self.studio.close()
        # Saved once the studio is closed (a voice still loading stops first); straight
        # into the settings, not through apply_settings: nothing is to open or close.
        geometry = window_place.saved(self)
        if geometry != self.settings.window_geometry:
            self.studio.settings = replace(self.settings, window_geometry=geometry)
            self.studio.save_settings()
        super().closeEvent(event)


def run_app(argv: list[str] | None = None, *, output_window: bool | None = None,
            browser_port: int | None = None, api_port: int | None = None) -> int:
    app = QApplication.instance() or QApplication(argv or sys.argv)
    app.setApplicationName("Lipsync Studio")
    # Desktops match the window with the .desktop file by this name (Wayland's app id).
    app.setDesktopFileName(APP_ID)
    icon = QIcon()
    for png in sorted(ICONS_DIR.glob(f"{APP_ID}-*.png")):
        icon.addFile(str(png))
    app.setWindowIcon(icon)
    store = SettingsStore()
    settings = store.load()
    window = MainWindow(store, settings, output_window=output_window, browser_port=browser_port,
                        api_port=api_port)
    window.studio.voice_ready.connect(freeze_long_lived)
    window.show()
    return app.exec()
