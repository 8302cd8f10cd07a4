"""The settings panel: every knob of the Settings model, applied as it is edited.

Not modal: the window, Stop, speaking and the hotkeys go on while it is open. Each
complete edit (app/ui/setting_fields.py) is checked by the model and, when taken,
handed on as whole new Settings (`changed`); a refused field is marked, named as the user
sees it, and not applied, while every other field goes on applying. Restore defaults
puts the panel's fields back to the model's defaults; Close (or Esc) closes it.

Other parts of the app put their own widgets in it with `add_section`: the voices in
"Voice", the avatar library in "Avatar", the hotkey editor in "Hotkeys".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QCheckBox,
    QColorDialog,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.first_audio import HEARD_FIRST_AUDIO, SYNTHESIS_FIRST_AUDIO
from app.setting_labels import LABELS
from app.settings import Settings, validate
from app.ui import frame_rate_hints, latency_choices
from app.ui.obs_setup_box import ObsSetupBox
from app.ui.setting_fields import INVALID_STYLE, SettingField, bind, device_box, list_in
from pipeline.audio.devices import Kind, list_devices, list_devices_now
from render.outputs.background import CHROMA, SOLID, TRANSPARENT, ColourError, parse_colour

FIRST_AUDIO_NOTE = (
    f"The figures are {SYNTHESIS_FIRST_AUDIO}: from the request to the first sound "
    "synthesized, measured for each mode on this computer at start-up. Sound is heard "
    "later, after the start-up buffer and the audio output's latency: the status line's "
    f"{HEARD_FIRST_AUDIO}, from Enter to the first sample at the sound card.")
# The sections other parts of the app fill (add_section); the first two are tabs here.
VOICE, AVATAR, HOTKEYS = "Voice", "Avatar", "Hotkeys"
# Fields whose change reopens a device or loads something: the panel says what it is
# doing while it happens.
SLOW = {"audio_output_device": "Opening the audio output…",
        "mic_enabled": "Switching the microphone…", "mic_device": "Opening the microphone…",
        "mic_lipsync": "Loading the microphone's lip sync…",
        "avatar_manifest": "Loading the avatar…"}


def _fresh(kind: Kind) -> list[str]:
    names = list_devices_now(kind)
    return names if names is not None else list_devices(kind)


class SettingsPanel(QDialog):
    """Shows `current()`'s settings; `changed(settings)` with new whole settings on each
    edit the model takes. `show_settings` shows settings changed elsewhere.
    `shown_fps`: the rate the avatar is drawn at now, for the frame-rate hints.

    Invariant: every field not marked invalid shows the value in effect (the last one
    handed on, or shown)."""

    changed = Signal(object)

    def __init__(self, current: Callable[[], Settings],
                 mode_first_audio_ms: dict[str, float] | None = None,
                 parent: QWidget | None = None, *, shown_fps: int | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Lipsync Studio settings")
        self.setModal(False)
        self.setStyleSheet(INVALID_STYLE)
        self._current = current
        self._shown_fps = shown_fps
        self.fields: dict[str, SettingField] = {}
        self._section_editors: list[QWidget] = []
        self.tabs = QTabWidget()
        self.sections: dict[str, QVBoxLayout] = {}
        self._build_voice(self._tab(VOICE), mode_first_audio_ms or {})
        self._build_mic(self._tab("Microphone"))
        self._build_avatar(self._tab(AVATAR))
        self._build_outputs(self._tab("Outputs (OBS)"))
        self._build_api(self._tab("API and avatar apps"))

        self.error = QLabel()
        self.error.setStyleSheet("color: #c0392b")
        self.error.setWordWrap(True)
        self.error.setTextFormat(Qt.TextFormat.PlainText)
        self.busy = QLabel()
        self.voice_progress = QProgressBar()
        self.voice_progress.setRange(0, 100)
        self.voice_progress.setFormat("Loading the voice… %p%")
        self.voice_progress.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.RestoreDefaults
                                   | QDialogButtonBox.StandardButton.Close)
        buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults).clicked.connect(
            self.restore_defaults)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)
        layout.addWidget(self.error)
        layout.addWidget(self.busy)
        layout.addWidget(self.voice_progress)
        layout.addWidget(buttons)
        self.show_settings(current())
        self._fit_first_tab()

    # -- building -------------------------------------------------------------------

    def _tab(self, title: str) -> QFormLayout:
        """A tab that scrolls rather than cut anything off, with a place at its top for
        a section from elsewhere (add_section) and a form below it."""
        page = QWidget()
        column = QVBoxLayout(page)
        self.sections[title] = QVBoxLayout()
        column.addLayout(self.sections[title])
        form = QFormLayout()
        # Rows wrap under their labels where the panel is narrow: no text is cut.
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        column.addLayout(form)
        column.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(page)
        self.tabs.addTab(scroll, title)
        return form

    def _fit_first_tab(self) -> None:
        """Tall enough for the first tab (the one shown on opening) not to scroll,
        within the screen; the others scroll where they are longer."""
        scroll = self.tabs.widget(0)
        # Wrapped notes are taller than the page's size hint says, at the page's width.
        more = (scroll.widget().heightForWidth(scroll.sizeHint().width())
                - scroll.sizeHint().height())
        screen = self.screen().availableGeometry()
        hint = self.sizeHint()
        self.resize(hint.width(), min(screen.height(), hint.height() + max(0, more)))

    def add_section(self, title: str, widget: QWidget) -> None:
        """Put `widget` at the top of tab `title` (VOICE, AVATAR), or in a tab of its own
        (HOTKEYS, or any other title). A widget on the panel's own contract (a `changed`
        signal with whole new settings, `show_settings(settings)`; app/ui/voices_box.py
        is one) edits through the panel: its changes go out as the panel's, and it shows
        what the panel is shown."""
        if title not in self.sections:
            self._tab(title)
        self.sections[title].addWidget(widget)
        if hasattr(widget, "changed") and hasattr(widget, "show_settings"):
            widget.changed.connect(self.changed)
            self._section_editors.append(widget)
        if not self.isVisible():
            self._fit_first_tab()

    def _field(self, name: str, widget: QWidget, **options) -> QWidget:
        """`widget` edits setting `name` (setting_fields.bind)."""
        self.fields[name] = bind(name, LABELS[name], widget, self._edited, **options)
        return widget

    def _add(self, form: QFormLayout, name: str, widget: QWidget, **options) -> None:
        """A row of its own for the field, labelled as the user knows it."""
        form.addRow(LABELS[name], self._field(name, widget, **options))

    def _build_voice(self, form: QFormLayout, measured: dict[str, float]) -> None:
        self.mode = QComboBox()
        for _, name, details in latency_choices.choices({}):
            self.mode.addItem("", name)
            self.mode.setItemData(self.mode.count() - 1, details, Qt.ItemDataRole.ToolTipRole)
        self.show_first_audio(measured)
        self._add(form, "latency_mode", self.mode)
        self.mode_description = _note("")
        self.mode.currentIndexChanged.connect(self._describe_mode)
        form.addRow(self.mode_description)
        self.first_audio_note = _note(FIRST_AUDIO_NOTE)
        form.addRow(self.first_audio_note)
        self.speech_queue = QComboBox()
        self.speech_queue.addItem("Interrupt: a new line cuts what is being said", "interrupt")
        self.speech_queue.addItem("Queue: new lines wait their turn (chat, donations)", "queue")
        self._add(form, "speech_queue", self.speech_queue)
        self.rate = QDoubleSpinBox(minimum=0.5, maximum=2.0, singleStep=0.05, decimals=2)
        self._add(form, "speech_rate", self.rate)
        self.volume = QDoubleSpinBox(minimum=0.0, maximum=1.0, singleStep=0.05, decimals=2)
        self._add(form, "volume", self.volume)
        # Both pickers list devices as a newly initialised PortAudio does, so that one
        # plugged in since the app started can be chosen (the engine then re-initialises
        # its own PortAudio to open it).
        self.output = device_box(_fresh("output"), self._current().audio_output_device)
        self._add(form, "audio_output_device", self.output, device=True)
        self.inference = QComboBox()
        for name, label in (("auto", "Fastest available (GPU where there is one)"), ("cpu", "CPU"),
                            ("cuda", "NVIDIA GPU (CUDA)"), ("tensorrt", "NVIDIA GPU (TensorRT)")):
            self.inference.addItem(label, name)
        self.inference.setToolTip("Without the chosen one the voice runs on the next one down, "
                                  "and says why.")
        self._add(form, "inference_provider", self.inference)
        form.addRow(_note(f"Where the voice runs. {frame_rate_hints.RESTART}"))
        self.mouth_frames = QComboBox()
        for name, label in (("auto", "Faster on this avatar (timed at start)"), ("opengl", "OpenGL"),
                            ("cuda", "CUDA through CUDA-GL interop (NVIDIA GPU)")):
            self.mouth_frames.addItem(label, name)
        self.mouth_frames.setToolTip("Without CUDA-GL interop the mouth frames are made by "
                                     "OpenGL, and the status says why.")
        self._add(form, "mouth_frames", self.mouth_frames)
        form.addRow(_note("How the avatar's frames are made on an NVIDIA GPU: OpenGL's shaders or "
                          "CUDA's kernels. The faster is the one whose slowest frames (P99) are "
                          "quicker, what a display's deadline sees. Applies at once."))

    def _build_mic(self, form: QFormLayout) -> None:
        self.mic_enabled = QCheckBox("Mouth follows the microphone")
        self._add(form, "mic_enabled", self.mic_enabled)
        self.mic = device_box(_fresh("input"), self._current().mic_device)
        self._add(form, "mic_device", self.mic, device=True)
        self.mic_gain = QDoubleSpinBox(minimum=-20.0, maximum=30.0, singleStep=1.0, decimals=1,
                                       suffix=" dB")
        self._add(form, "mic_gain_db", self.mic_gain)
        self.mic_gate = QDoubleSpinBox(minimum=-90.0, maximum=0.0, singleStep=1.0, decimals=1,
                                       suffix=" dBFS")
        self._add(form, "mic_gate_db", self.mic_gate)
        self.mic_lipsync = QComboBox()
        self.mic_lipsync.addItem("Lip-shape model (15 mouth shapes)", "model")
        self.mic_lipsync.addItem("Volume gate (open / closed)", "volume")
        self._add(form, "mic_lipsync", self.mic_lipsync)

    def _build_avatar(self, form: QFormLayout) -> None:
        self.avatar = QLineEdit()
        self.avatar.setPlaceholderText("bundled avatar")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_avatar)
        form.addRow(LABELS["avatar_manifest"], _row(
            self._field("avatar_manifest", self.avatar, optional_text=True), browse))
        self.blinking = QCheckBox("Blink")
        self.breathing = QCheckBox("Breathe")
        form.addRow("Idle motion", _row(self._field("blinking", self.blinking),
                                        self._field("breathing", self.breathing)))
        # Motion strengths: 0 is off, 1 the most a rig allows (render/timing/avatar_motion.py).
        self.motion = {}
        for name in ("motion_bounce", "motion_tilt", "motion_shake", "motion_sway",
                     "motion_head_turn"):
            self.motion[name] = QDoubleSpinBox(minimum=0.0, maximum=1.0, singleStep=0.1,
                                               decimals=2)
            self.motion[name].setSpecialValueText("off")
            self._add(form, name, self.motion[name])
        self.expression_fade = QSpinBox(minimum=0, maximum=2000, singleStep=50, suffix=" ms")
        self._add(form, "expression_fade_ms", self.expression_fade)
        self.background = QLineEdit()
        form.addRow(LABELS["background"], _with_picker(
            self._field("background", self.background)))
        self.fps = QSpinBox(minimum=24, maximum=144, suffix=" fps")
        self.fps_hint = _note("")
        self._add(form, "target_fps", self.fps)
        form.addRow(self.fps_hint)
        self.software_gl_fps = QSpinBox(minimum=24, maximum=144, suffix=" fps")
        self.software_gl_fps_hint = _note("")
        self._add(form, "software_gl_fps", self.software_gl_fps)
        form.addRow(self.software_gl_fps_hint)

    def _build_outputs(self, form: QFormLayout) -> None:
        """The avatar window, browser source, virtual camera, captions and OBS."""
        self.output_window = QCheckBox("Show the avatar-only window (for OBS window capture)")
        self._add(form, "output_window", self.output_window)
        self.output_size = QComboBox()
        self.output_size.setEditable(True)
        self.output_size.addItems(["720p", "1080p"])
        self.output_size.setToolTip("720p, 1080p or any WIDTHxHEIGHT, e.g. 800x800")
        self._add(form, "output_size", self.output_size)
        self.output_borderless = QCheckBox("Borderless")
        self.output_on_top = QCheckBox("Always on top")
        form.addRow("", _row(self._field("output_borderless", self.output_borderless),
                             self._field("output_on_top", self.output_on_top)))
        self.output_background = QComboBox()
        for mode, label in ((TRANSPARENT, "Transparent (alpha)"), (SOLID, "Solid colour"),
                            (CHROMA, "Chroma key")):
            self.output_background.addItem(label, mode)
        self._add(form, "output_background", self.output_background)
        self.output_colour = QLineEdit()
        form.addRow(LABELS["output_colour"], _with_picker(
            self._field("output_colour", self.output_colour)))
        self.chroma_colour = QLineEdit()
        form.addRow(LABELS["chroma_colour"], _with_picker(
            self._field("chroma_colour", self.chroma_colour)))

        self.browser_source = QCheckBox("Serve the avatar as a web page (OBS browser source)")
        self._add(form, "browser_source", self.browser_source)
        self.browser_source_port = QSpinBox(minimum=1024, maximum=65535)
        form.addRow("Page port (127.0.0.1)",
                    self._field("browser_source_port", self.browser_source_port))

        self.virtual_camera = QCheckBox("Send the avatar to a virtual camera")
        self._add(form, "virtual_camera", self.virtual_camera)
        self.virtual_camera_size = QComboBox()
        for size in ("720p", "1080p"):
            self.virtual_camera_size.addItem(size, size)
        self.virtual_camera_fps = QComboBox()
        self.virtual_camera_fps.addItem("30 fps", 30)
        self.virtual_camera_fps.addItem("60 fps", 60)
        form.addRow("Camera format", _row(
            self._field("virtual_camera_size", self.virtual_camera_size),
            self._field("virtual_camera_fps", self.virtual_camera_fps)))

        self.captions_lead = QDoubleSpinBox(minimum=0.0, maximum=2000.0, singleStep=10.0,
                                            decimals=0, suffix=" ms")
        self.captions_lead.setToolTip("Captions show each word this long before it is heard.")
        self._add(form, "captions_lead_ms", self.captions_lead)
        self.captions_in_window = QCheckBox("In the avatar window and the page")
        self.captions_to_obs = QCheckBox("Into an OBS text source")
        form.addRow("Captions", _row(
            self._field("captions_in_window", self.captions_in_window),
            self._field("captions_to_obs", self.captions_to_obs)))

        self.obs_host = QLineEdit()
        self.obs_port = QSpinBox(minimum=1, maximum=65535)
        form.addRow("OBS websocket", _row(self._field("obs_host", self.obs_host),
                                          self._field("obs_port", self.obs_port)))
        self.obs_scene = QLineEdit()
        self.obs_scene.setPlaceholderText("OBS's current scene")
        self._add(form, "obs_scene", self.obs_scene, optional_text=True)
        self.obs_captions_source = QLineEdit()
        self._add(form, "obs_captions_source", self.obs_captions_source)
        self.obs_fps = QSpinBox(minimum=10, maximum=240, suffix=" fps")
        self.obs_fps.setToolTip("OBS's video frame rate (Settings → Video): the avatar window shows "
                                "each mouth half an OBS frame early, which is when OBS's capture "
                                "takes it on average")
        self._add(form, "obs_fps", self.obs_fps)
        self.obs_live_updates = QCheckBox("Keep OBS's mic sync offset at the measured delay")
        form.addRow("", self._field("obs_live_updates", self.obs_live_updates))
        self.obs_setup = ObsSetupBox(self._checked_settings)
        self.obs_setup.finished.connect(self._obs_added)
        form.addRow("OBS", self.obs_setup)

    def _build_api(self, form: QFormLayout) -> None:
        """The API for bots and tools (docs/api.md), and our lip sync sent to VTube
        Studio and to VMC apps (VSeeFace, Warudo, VNyan)."""
        self.api_enabled = QCheckBox("Let bots and tools drive the app (HTTP and WebSocket)")
        self._add(form, "api_enabled", self.api_enabled)
        self.api_port = QSpinBox(minimum=1024, maximum=65535)
        self._add(form, "api_port", self.api_port)
        self.api_bind_address = QLineEdit()
        self.api_bind_address.setToolTip("127.0.0.1: this computer only. Another address (e.g. "
                                          "0.0.0.0) also needs the box below.")
        self._add(form, "api_bind_address", self.api_bind_address)
        self.api_allow_network = QCheckBox("Let other computers reach the API (each still "
                                           "needs a token)")
        form.addRow("", self._field("api_allow_network", self.api_allow_network))
        self.api_allowed_origins = QLineEdit()
        self.api_allowed_origins.setPlaceholderText("none: pages of other sites are refused")
        self.api_allowed_origins.setToolTip("Web pages allowed to use the API from a browser, "
                                            "e.g. https://example.com, separated by spaces")
        self._add(form, "api_allowed_origins", self.api_allowed_origins)
        self.api_max_message_bytes = QSpinBox(minimum=1024, maximum=16 * 2**20, singleStep=1024,
                                              suffix=" bytes")
        self._add(form, "api_max_message_bytes", self.api_max_message_bytes)
        self.api_messages_per_second = QSpinBox(minimum=1, maximum=10_000, suffix=" a second")
        self._add(form, "api_messages_per_second", self.api_messages_per_second)
        self.api_max_streams = QSpinBox(minimum=1, maximum=1024)
        self.api_max_streams.setToolTip("On an NVIDIA GPU the voice is warmed to run this many "
                                        "streams together: over 1 in batches of 8, over 8 of 64 "
                                        "too, each a longer start (docs/api.md).")
        self._add(form, "api_max_streams", self.api_max_streams)

        self.vtube_studio = QCheckBox("Move a VTube Studio model's mouth (its plugin API)")
        self._add(form, "vtube_studio", self.vtube_studio)
        self.vtube_studio_host = QLineEdit()
        self.vtube_studio_port = QSpinBox(minimum=1, maximum=65535)
        form.addRow("VTube Studio address", _row(
            self._field("vtube_studio_host", self.vtube_studio_host),
            self._field("vtube_studio_port", self.vtube_studio_port)))
        self.vtube_studio_offset = _offset_box()
        self._add(form, "vtube_studio_offset_ms", self.vtube_studio_offset)
        self.vmc = QCheckBox("Send VMC blend shapes (VSeeFace, Warudo, VNyan)")
        self._add(form, "vmc", self.vmc)
        self.vmc_host = QLineEdit()
        self.vmc_port = QSpinBox(minimum=1, maximum=65535)
        form.addRow("VMC address", _row(self._field("vmc_host", self.vmc_host),
                                        self._field("vmc_port", self.vmc_port)))
        self.vmc_blendshapes = QComboBox()
        self.vmc_blendshapes.addItem("VRM 0.x: A I U E O", "vrm0")
        self.vmc_blendshapes.addItem("VRM 1.0: aa ih ou ee oh", "vrm1")
        self._add(form, "vmc_blendshapes", self.vmc_blendshapes)
        self.vmc_offset = _offset_box()
        self._add(form, "vmc_offset_ms", self.vmc_offset)

    # -- showing --------------------------------------------------------------------

    def refresh_devices(self) -> None:
        """Both pickers list the devices there are now, each keeping its choice: the
        panel is made once, and a device plugged in since was missing until a restart."""
        current = self._current()
        list_in(self.output, _fresh("output"), current.audio_output_device)
        list_in(self.mic, _fresh("input"), current.mic_device)

    def show_settings(self, settings: Settings) -> None:
        """Show `settings` in every field but those refused now (the user is at them)."""
        for name, field in self.fields.items():
            if not field.refused:
                field.show(getattr(settings, name))
        for editor in self._section_editors:
            editor.show_settings(settings)
        self._describe_mode()
        self._show_frame_rate_hints()

    def _describe_mode(self) -> None:
        self.mode_description.setText(latency_choices.EXPLANATIONS[self.mode.currentData()])

    def _show_frame_rate_hints(self) -> None:
        beside_fps, beside_software = frame_rate_hints.hints(
            self.fps.value(), self.software_gl_fps.value(), self._shown_fps)
        self.fps_hint.setText(beside_fps)
        self.software_gl_fps_hint.setText(beside_software)

    def show_first_audio(self, measured_ms: dict[str, float]) -> None:
        """Each latency mode's measured first audio (Studio.mode_first_audio_ms), in the
        list: known once the voice is warm, which may be after the panel opened."""
        for index, (label, _, _) in enumerate(latency_choices.choices(measured_ms)):
            self.mode.setItemText(index, label)

    def show_voice_progress(self, fraction: float | None) -> None:
        """A voice loading, `fraction` done; None when it is ready."""
        self.voice_progress.setVisible(fraction is not None)
        if fraction is not None:
            self.voice_progress.setValue(round(fraction * 100))

    # -- editing --------------------------------------------------------------------

    def _check(self) -> dict[str, str]:
        """Every refused field's problem, by field; all of them said under the tabs."""
        problems = {name: text for name, field in self.fields.items() if (text := field.check())}
        self.error.setText("\n".join(problems.values()))
        return problems

    def _edited(self, name: str) -> None:
        """One field's edit is complete: the model's word, then the new settings on."""
        self._take({name: self.fields[name].read()})

    def _take(self, values: dict) -> None:
        refused = self._check()
        values = {name: value for name, value in values.items() if name not in refused}
        current = self._current()
        settings, _ = validate({**asdict(current), **values})
        self._show_frame_rate_hints()
        if settings == current:
            return
        slow = [SLOW[name] for name in values if name in SLOW
                and getattr(settings, name) != getattr(current, name)]
        if slow:
            # Painted before the change runs, which may take a moment (a device opening).
            self.busy.setText(slow[0])
            self.busy.repaint()
        self.changed.emit(settings)
        self.busy.setText("")

    def restore_defaults(self) -> QMessageBox:
        """Asks first, in a box of the panel's own (the main window goes on): every
        field is applied as it changes, so there is no Cancel to take it back after."""
        box = QMessageBox(QMessageBox.Icon.Question, "Restore defaults?",
                          "Put every setting of this panel back to its default, the devices, "
                          "outputs, OBS and API ones included? They apply at once.",
                          QMessageBox.StandardButton.RestoreDefaults
                          | QMessageBox.StandardButton.Cancel, self)
        box.button(QMessageBox.StandardButton.RestoreDefaults).clicked.connect(self._restore)
        box.open()
        return box

    def _restore(self) -> None:
        """Every field of the panel back to the model's default, applied at once."""
        defaults = Settings()
        for name, field in self.fields.items():
            field.show(getattr(defaults, name))
        self._take({name: getattr(defaults, name) for name in self.fields})

    def _checked_settings(self) -> Settings | None:
        """The settings in effect, or None with the refused fields said."""
        return None if self._check() else self._current()

    def _obs_added(self, succeeded: bool, _text: str) -> None:
        # Added: from now on the app keeps OBS's mic offset in step (unless unticked).
        if succeeded:
            self.obs_live_updates.setChecked(True)

    def _browse_avatar(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Avatar manifest", "", "Rig manifest (*.json)")
        if path:
            self.avatar.setText(path)
            self._edited("avatar_manifest")


def _note(text: str) -> QLabel:
    """An explanation under a field, wrapped to the panel's width."""
    label = QLabel(text)
    label.setWordWrap(True)
    label.setStyleSheet("color: palette(placeholder-text)")
    return label


def _offset_box() -> QDoubleSpinBox:
    box = QDoubleSpinBox(minimum=-500.0, maximum=1000.0, singleStep=5.0, decimals=0, suffix=" ms")
    box.setToolTip("How long the other app takes to show a mouth it got, which this app cannot "
                   "measure: mouths are sent that much earlier. Raise it if that app's mouth "
                   "moves after the sound, lower it if before.")
    return box


def _row(*widgets: QWidget) -> QWidget:
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    for i, widget in enumerate(widgets):
        layout.addWidget(widget, 1 if i == 0 else 0)
    return row


def _with_picker(field: QLineEdit) -> QWidget:
    """A colour field with a button that opens the system colour picker on its colour."""
    button = QPushButton("Pick…")

    def pick() -> None:
        try:
            r, g, b, a = parse_colour(field.text())
        except ColourError:
            r, g, b, a = 0.0, 0.0, 0.0, 1.0
        start = QColor.fromRgbF(r, g, b, a)
        colour = QColorDialog.getColor(start, field, "Colour",
                                       QColorDialog.ColorDialogOption.ShowAlphaChannel)
        if colour.isValid():
            text = colour.name(QColor.NameFormat.HexRgb)
            field.setText(text if colour.alpha() == 255 else f"{text}{colour.alpha():02x}")
            field.editingFinished.emit()

    button.clicked.connect(pick)
    return _row(field, button)
