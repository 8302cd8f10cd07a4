"""The settings panel: every knob of the Settings model, validated by the model itself."""

from __future__ import annotations

from dataclasses import asdict

from PySide6.QtCore import Qt
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
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.settings import Settings, validate
from app.studio import HEARD_FIRST_AUDIO, SYNTHESIS_FIRST_AUDIO
from app.ui.obs_setup_box import ObsSetupBox
from pipeline.audio.devices import Kind, list_devices, list_devices_now
from pipeline.lipsync.model import MIC_TRADES
from pipeline.voice.streaming_tts import LATENCY_MODES
from render.outputs.background import CHROMA, SOLID, TRANSPARENT, ColourError, parse_colour

SYSTEM_DEFAULT = "System default"
BUNDLED_AVATAR = ""
FIRST_AUDIO_NOTE = (
    f"{SYNTHESIS_FIRST_AUDIO.capitalize()}: from the request to the first sound synthesized, "
    "measured for each mode on this computer at start-up. Sound is heard later, after the "
    "start-up buffer and the audio output's latency: the status line's "
    f"{HEARD_FIRST_AUDIO}, from Enter to the first sample at the sound card.")


def mode_text(name: str) -> str:
    """What a latency mode trades, for the voice and for the microphone."""
    return f"{LATENCY_MODES[name].description} {MIC_TRADES[name]}"


def _device_box(devices: list[str], chosen: str | None) -> QComboBox:
    """A device picker; a saved device that is not plugged in now stays listed and
    selected, so opening the panel never changes the choice silently."""
    box = QComboBox()
    box.addItem(SYSTEM_DEFAULT)
    box.addItems(devices)
    if chosen:
        if box.findText(chosen) < 0:
            box.addItem(chosen)
        box.setCurrentText(chosen)
    return box


def _fresh(kind: Kind) -> list[str]:
    names = list_devices_now(kind)
    return names if names is not None else list_devices(kind)


class SettingsPanel(QDialog):
    """Edits a copy of Settings; `result_settings()` is only valid after accept()."""

    def __init__(self, settings: Settings, mode_first_audio_ms: dict[str, float] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Lipsync Studio settings")
        self._settings = settings
        tabs = QTabWidget()
        general = QWidget()
        form = QFormLayout(general)
        tabs.addTab(general, "General")

        self.mode = QComboBox()
        measured = mode_first_audio_ms or {}
        for name in LATENCY_MODES:
            figure = (f"{SYNTHESIS_FIRST_AUDIO} {measured[name]:.0f} ms here" if name in measured
                      else "not measured yet")
            self.mode.addItem(f"{name} ({figure})", name)
            self.mode.setItemData(self.mode.count() - 1, mode_text(name), Qt.ItemDataRole.ToolTipRole)
        self.mode.setCurrentIndex(self.mode.findData(settings.latency_mode))
        self.mode_description = QLabel(mode_text(settings.latency_mode))
        self.mode_description.setWordWrap(True)
        self.mode.currentIndexChanged.connect(
            lambda _: self.mode_description.setText(mode_text(self.mode.currentData())))
        form.addRow("Latency mode", self.mode)
        self.speech_queue = QComboBox()
        self.speech_queue.addItem("Interrupt: a new line cuts what is being said", "interrupt")
        self.speech_queue.addItem("Queue: new lines wait their turn (chat, donations)", "queue")
        self.speech_queue.setCurrentIndex(self.speech_queue.findData(settings.speech_queue))
        form.addRow("New lines", self.speech_queue)
        form.addRow("", self.mode_description)
        self.first_audio_note = QLabel(FIRST_AUDIO_NOTE)
        self.first_audio_note.setWordWrap(True)
        form.addRow("", self.first_audio_note)

        # Both pickers list devices as a newly initialised PortAudio does, so that one
        # plugged in since the app started can be chosen (the engine then re-initialises
        # its own PortAudio to open it).
        self.output = _device_box(_fresh("output"), settings.audio_output_device)
        form.addRow("Audio output", self.output)

        self.mic_enabled = QCheckBox("Mouth follows the microphone")
        self.mic_enabled.setChecked(settings.mic_enabled)
        form.addRow("Microphone", self.mic_enabled)
        self.mic = _device_box(_fresh("input"), settings.mic_device)
        form.addRow("Microphone device", self.mic)
        self.mic_gain = QDoubleSpinBox(minimum=-20.0, maximum=30.0, singleStep=1.0, decimals=1, suffix=" dB")
        self.mic_gain.setValue(settings.mic_gain_db)
        form.addRow("Input gain", self.mic_gain)
        self.mic_gate = QDoubleSpinBox(minimum=-90.0, maximum=0.0, singleStep=1.0, decimals=1, suffix=" dBFS")
        self.mic_gate.setValue(settings.mic_gate_db)
        form.addRow("Noise gate", self.mic_gate)
        self.mic_lipsync = QComboBox()
        self.mic_lipsync.addItem("Lip-shape model (15 mouth shapes)", "model")
        self.mic_lipsync.addItem("Volume gate (open / closed)", "volume")
        self.mic_lipsync.setCurrentIndex(self.mic_lipsync.findData(settings.mic_lipsync))
        form.addRow("Mic lip sync", self.mic_lipsync)

        self.avatar = QLineEdit(settings.avatar_manifest or BUNDLED_AVATAR)
        self.avatar.setPlaceholderText("bundled avatar")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_avatar)
        row = QHBoxLayout()
        row.addWidget(self.avatar)
        row.addWidget(browse)
        form.addRow("Avatar manifest", row)

        self.rate = QDoubleSpinBox(minimum=0.5, maximum=2.0, singleStep=0.05, decimals=2)
        self.rate.setValue(settings.speech_rate)
        form.addRow("Speaking rate", self.rate)
        self.volume = QDoubleSpinBox(minimum=0.0, maximum=1.0, singleStep=0.05, decimals=2)
        self.volume.setValue(settings.volume)
        form.addRow("Volume", self.volume)
        self.fps = QSpinBox(minimum=24, maximum=144)
        self.fps.setValue(settings.target_fps)
        form.addRow("Frame rate (fps)", self.fps)
        self.software_gl_fps = QSpinBox(minimum=24, maximum=144)
        self.software_gl_fps.setValue(settings.software_gl_fps)
        self.software_gl_fps.setToolTip(
            "Without a GPU driver OpenGL draws on the CPU, which the voice and the microphone "
            "need too: there the frame rate is at most this. Both take effect at restart.")
        form.addRow("Frame rate with software OpenGL", self.software_gl_fps)
        self.blinking = QCheckBox("Blink")
        self.blinking.setChecked(settings.blinking)
        self.breathing = QCheckBox("Breathe")
        self.breathing.setChecked(settings.breathing)
        idle = QHBoxLayout()
        idle.addWidget(self.blinking)
        idle.addWidget(self.breathing)
        form.addRow("Idle motion", idle)
        self.background = QLineEdit(settings.background)
        form.addRow("Background colour", _with_picker(self.background))
        self.inference = QComboBox()
        for name, label in (("auto", "Fastest available (GPU where there is one)"), ("cpu", "CPU"),
                            ("cuda", "NVIDIA GPU (CUDA)"), ("tensorrt", "NVIDIA GPU (TensorRT)")):
            self.inference.addItem(label, name)
        self.inference.setCurrentIndex(self.inference.findData(settings.inference_provider))
        self.inference.setToolTip("Where the voice runs; takes effect at restart. Without the "
                                  "chosen one the voice runs on the next one down, and says why.")
        form.addRow("Voice inference", self.inference)

        outputs = QWidget()
        tabs.addTab(outputs, "Outputs (OBS)")
        self._build_outputs(QFormLayout(outputs), settings)
        api = QWidget()
        tabs.addTab(api, "API and avatar apps")
        self._build_api(QFormLayout(api), settings)

        self.error = QLabel()
        self.error.setStyleSheet("color: #c0392b")
        self.error.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(tabs)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        self._result = settings

    def _build_outputs(self, form: QFormLayout, settings: Settings) -> None:
        """The avatar window, browser source, virtual camera, captions and OBS."""
        self.output_window = QCheckBox("Show the avatar-only window (for OBS window capture)")
        self.output_window.setChecked(settings.output_window)
        form.addRow("Avatar window", self.output_window)
        self.output_size = QComboBox()
        self.output_size.setEditable(True)
        self.output_size.addItems(["720p", "1080p"])
        self.output_size.setCurrentText(settings.output_size)
        self.output_size.setToolTip("720p, 1080p or any WIDTHxHEIGHT, e.g. 800x800")
        form.addRow("Window size", self.output_size)
        self.output_borderless = QCheckBox("Borderless")
        self.output_borderless.setChecked(settings.output_borderless)
        self.output_on_top = QCheckBox("Always on top")
        self.output_on_top.setChecked(settings.output_on_top)
        flags = QHBoxLayout()
        flags.addWidget(self.output_borderless)
        flags.addWidget(self.output_on_top)
        form.addRow("", flags)
        self.output_background = QComboBox()
        for mode, label in ((TRANSPARENT, "Transparent (alpha)"), (SOLID, "Solid colour"),
                            (CHROMA, "Chroma key")):
            self.output_background.addItem(label, mode)
        self.output_background.setCurrentIndex(self.output_background.findData(settings.output_background))
        form.addRow("Background", self.output_background)
        self.output_colour = QLineEdit(settings.output_colour)
        form.addRow("Solid colour", _with_picker(self.output_colour))
        self.chroma_colour = QLineEdit(settings.chroma_colour)
        form.addRow("Chroma key colour", _with_picker(self.chroma_colour))

        self.browser_source = QCheckBox("Serve the avatar as a web page (OBS browser source)")
        self.browser_source.setChecked(settings.browser_source)
        form.addRow("Browser source", self.browser_source)
        self.browser_source_port = QSpinBox(minimum=1024, maximum=65535)
        self.browser_source_port.setValue(settings.browser_source_port)
        form.addRow("Page port (127.0.0.1)", self.browser_source_port)

        self.virtual_camera = QCheckBox("Send the avatar to a virtual camera")
        self.virtual_camera.setChecked(settings.virtual_camera)
        form.addRow("Virtual camera", self.virtual_camera)
        self.virtual_camera_size = QComboBox()
        self.virtual_camera_size.addItems(["720p", "1080p"])
        self.virtual_camera_size.setCurrentText(settings.virtual_camera_size)
        self.virtual_camera_fps = QComboBox()
        self.virtual_camera_fps.addItem("30 fps", 30)
        self.virtual_camera_fps.addItem("60 fps", 60)
        self.virtual_camera_fps.setCurrentIndex(self.virtual_camera_fps.findData(settings.virtual_camera_fps))
        camera = QHBoxLayout()
        camera.addWidget(self.virtual_camera_size)
        camera.addWidget(self.virtual_camera_fps)
        form.addRow("Camera format", camera)

        self.captions_lead = QDoubleSpinBox(minimum=0.0, maximum=2000.0, singleStep=10.0,
                                            decimals=0, suffix=" ms")
        self.captions_lead.setValue(settings.captions_lead_ms)
        self.captions_lead.setToolTip("Captions show each word this long before it is heard.")
        form.addRow("Captions lead", self.captions_lead)
        self.captions_in_window = QCheckBox("In the avatar window and the page")
        self.captions_in_window.setChecked(settings.captions_in_window)
        self.captions_to_obs = QCheckBox("Into an OBS text source")
        self.captions_to_obs.setChecked(settings.captions_to_obs)
        captions = QHBoxLayout()
        captions.addWidget(self.captions_in_window)
        captions.addWidget(self.captions_to_obs)
        form.addRow("Captions", captions)

        self.obs_host = QLineEdit(settings.obs_host)
        self.obs_port = QSpinBox(minimum=1, maximum=65535)
        self.obs_port.setValue(settings.obs_port)
        obs = QHBoxLayout()
        obs.addWidget(self.obs_host, 1)
        obs.addWidget(self.obs_port)
        form.addRow("OBS websocket", obs)
        self.obs_scene = QLineEdit(settings.obs_scene or "")
        self.obs_scene.setPlaceholderText("OBS's current scene")
        form.addRow("OBS scene", self.obs_scene)
        self.obs_captions_source = QLineEdit(settings.obs_captions_source)
        form.addRow("OBS captions source", self.obs_captions_source)
        self.obs_fps = QSpinBox(minimum=10, maximum=240)
        self.obs_fps.setValue(settings.obs_fps)
        self.obs_fps.setSuffix(" fps")
        self.obs_fps.setToolTip("OBS's video frame rate (Settings → Video): the avatar window shows "
                                "each mouth half an OBS frame early, which is when OBS's capture "
                                "takes it on average")
        form.addRow("OBS frame rate", self.obs_fps)
        self.obs_live_updates = QCheckBox("Keep OBS's mic sync offset at the measured delay")
        self.obs_live_updates.setChecked(settings.obs_live_updates)
        form.addRow("", self.obs_live_updates)
        self.obs_setup = ObsSetupBox(self._checked_settings)
        self.obs_setup.finished.connect(self._obs_added)
        form.addRow("OBS", self.obs_setup)

    def _build_api(self, form: QFormLayout, settings: Settings) -> None:
        """The API for bots and tools (docs/api.md), and our lip sync sent to VTube
        Studio and to VMC apps (VSeeFace, Warudo, VNyan)."""
        self.api_enabled = QCheckBox("Let bots and tools drive the app (HTTP and WebSocket)")
        self.api_enabled.setChecked(settings.api_enabled)
        form.addRow("API", self.api_enabled)
        self.api_port = QSpinBox(minimum=1024, maximum=65535)
        self.api_port.setValue(settings.api_port)
        form.addRow("API port", self.api_port)
        self.api_bind_address = QLineEdit(settings.api_bind_address)
        self.api_bind_address.setToolTip("127.0.0.1: this computer only. Another address (e.g. "
                                          "0.0.0.0) also needs the box below.")
        form.addRow("Listen on", self.api_bind_address)
        self.api_allow_network = QCheckBox("Let other computers reach the API (each still "
                                           "needs a token)")
        self.api_allow_network.setChecked(settings.api_allow_network)
        form.addRow("", self.api_allow_network)
        self.api_allowed_origins = QLineEdit(settings.api_allowed_origins)
        self.api_allowed_origins.setPlaceholderText("none: pages of other sites are refused")
        self.api_allowed_origins.setToolTip("Web pages allowed to use the API from a browser, "
                                            "e.g. https://example.com, separated by spaces")
        form.addRow("Allowed page origins", self.api_allowed_origins)
        self.api_max_message_bytes = QSpinBox(minimum=1024, maximum=16 * 2**20, singleStep=1024)
        self.api_max_message_bytes.setValue(settings.api_max_message_bytes)
        self.api_max_message_bytes.setSuffix(" bytes")
        form.addRow("Largest message", self.api_max_message_bytes)
        self.api_messages_per_second = QSpinBox(minimum=1, maximum=10_000)
        self.api_messages_per_second.setValue(settings.api_messages_per_second)
        self.api_messages_per_second.setSuffix(" a second")
        form.addRow("Messages per connection", self.api_messages_per_second)
        self.api_max_streams = QSpinBox(minimum=1, maximum=1024)
        self.api_max_streams.setValue(settings.api_max_streams)
        form.addRow("Speech streams at once", self.api_max_streams)

        self.vtube_studio = QCheckBox("Move a VTube Studio model's mouth (its plugin API)")
        self.vtube_studio.setChecked(settings.vtube_studio)
        form.addRow("VTube Studio", self.vtube_studio)
        self.vtube_studio_host = QLineEdit(settings.vtube_studio_host)
        self.vtube_studio_port = QSpinBox(minimum=1, maximum=65535)
        self.vtube_studio_port.setValue(settings.vtube_studio_port)
        self.vtube_studio_offset = _offset_box(settings.vtube_studio_offset_ms)
        form.addRow("VTube Studio address", _row(self.vtube_studio_host, self.vtube_studio_port))
        form.addRow("VTube Studio shows late by", self.vtube_studio_offset)
        self.vmc = QCheckBox("Send VMC blend shapes (VSeeFace, Warudo, VNyan)")
        self.vmc.setChecked(settings.vmc)
        form.addRow("VMC", self.vmc)
        self.vmc_host = QLineEdit(settings.vmc_host)
        self.vmc_port = QSpinBox(minimum=1, maximum=65535)
        self.vmc_port.setValue(settings.vmc_port)
        form.addRow("VMC address", _row(self.vmc_host, self.vmc_port))
        self.vmc_blendshapes = QComboBox()
        self.vmc_blendshapes.addItem("VRM 0.x: A I U E O", "vrm0")
        self.vmc_blendshapes.addItem("VRM 1.0: aa ih ou ee oh", "vrm1")
        self.vmc_blendshapes.setCurrentIndex(self.vmc_blendshapes.findData(settings.vmc_blendshapes))
        form.addRow("VMC blend shapes", self.vmc_blendshapes)
        self.vmc_offset = _offset_box(settings.vmc_offset_ms)
        form.addRow("The VMC app shows late by", self.vmc_offset)

    def _browse_avatar(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Avatar manifest", "", "Rig manifest (*.json)")
        if path:
            self.avatar.setText(path)

    def _raw(self) -> dict:
        output = self.output.currentText()
        return {
            **asdict(self._settings),
            "audio_output_device": None if output == SYSTEM_DEFAULT else output,
            "latency_mode": self.mode.currentData(),
            "speech_queue": self.speech_queue.currentData(),
            "mic_enabled": self.mic_enabled.isChecked(),
            "mic_device": None if self.mic.currentText() == SYSTEM_DEFAULT else self.mic.currentText(),
            "mic_gain_db": self.mic_gain.value(),
            "mic_gate_db": self.mic_gate.value(),
            "mic_lipsync": self.mic_lipsync.currentData(),
            "avatar_manifest": self.avatar.text().strip() or None,
            "speech_rate": self.rate.value(),
            "volume": self.volume.value(),
            "target_fps": self.fps.value(),
            "software_gl_fps": self.software_gl_fps.value(),
            "blinking": self.blinking.isChecked(),
            "breathing": self.breathing.isChecked(),
            "background": self.background.text().strip(),
            "inference_provider": self.inference.currentData(),
            "output_window": self.output_window.isChecked(),
            "output_size": self.output_size.currentText().strip(),
            "output_borderless": self.output_borderless.isChecked(),
            "output_on_top": self.output_on_top.isChecked(),
            "output_background": self.output_background.currentData(),
            "output_colour": self.output_colour.text().strip(),
            "chroma_colour": self.chroma_colour.text().strip(),
            "browser_source": self.browser_source.isChecked(),
            "browser_source_port": self.browser_source_port.value(),
            "virtual_camera": self.virtual_camera.isChecked(),
            "virtual_camera_size": self.virtual_camera_size.currentText(),
            "virtual_camera_fps": self.virtual_camera_fps.currentData(),
            "captions_lead_ms": self.captions_lead.value(),
            "captions_in_window": self.captions_in_window.isChecked(),
            "captions_to_obs": self.captions_to_obs.isChecked(),
            "obs_host": self.obs_host.text().strip(),
            "obs_port": self.obs_port.value(),
            "obs_scene": self.obs_scene.text().strip() or None,
            "obs_captions_source": self.obs_captions_source.text().strip(),
            "obs_live_updates": self.obs_live_updates.isChecked(),
            "obs_fps": self.obs_fps.value(),
            "api_enabled": self.api_enabled.isChecked(),
            "api_port": self.api_port.value(),
            "api_bind_address": self.api_bind_address.text().strip(),
            "api_allow_network": self.api_allow_network.isChecked(),
            "api_allowed_origins": self.api_allowed_origins.text().strip(),
            "api_max_message_bytes": self.api_max_message_bytes.value(),
            "api_messages_per_second": self.api_messages_per_second.value(),
            "api_max_streams": self.api_max_streams.value(),
            "vtube_studio": self.vtube_studio.isChecked(),
            "vtube_studio_host": self.vtube_studio_host.text().strip(),
            "vtube_studio_port": self.vtube_studio_port.value(),
            "vtube_studio_offset_ms": self.vtube_studio_offset.value(),
            "vmc": self.vmc.isChecked(),
            "vmc_host": self.vmc_host.text().strip(),
            "vmc_port": self.vmc_port.value(),
            "vmc_blendshapes": self.vmc_blendshapes.currentData(),
            "vmc_offset_ms": self.vmc_offset.value(),
        }

    def _checked_settings(self) -> Settings | None:
        """The fields as settings, or None with the problems shown."""
        settings, problems = validate(self._raw())
        self.error.setText("\n".join(problems))
        return None if problems else settings

    def _obs_added(self, succeeded: bool, _text: str) -> None:
        # Added: from now on the app keeps OBS's mic offset in step (unless unticked).
        if succeeded:
            self.obs_live_updates.setChecked(True)

    def _accept(self) -> None:
        settings, problems = validate(self._raw())
        if problems:
            self.error.setText("\n".join(problems))
            return
        self._result = settings
        self.accept()

    def result_settings(self) -> Settings:
        return self._result


def _offset_box(value_ms: float) -> QDoubleSpinBox:
    box = QDoubleSpinBox(minimum=-500.0, maximum=1000.0, singleStep=5.0, decimals=0, suffix=" ms")
    box.setValue(value_ms)
    box.setToolTip("How long the other app takes to show a mouth it got, which this app cannot "
                   "measure: mouths are sent that much earlier. Raise it if that app's mouth "
                   "moves after the sound, lower it if before.")
    return box


def _row(*widgets: QWidget) -> QHBoxLayout:
    row = QHBoxLayout()
    for i, widget in enumerate(widgets):
        row.addWidget(widget, 1 if i == 0 else 0)
    return row


def _with_picker(field: QLineEdit) -> QHBoxLayout:
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

    button.clicked.connect(pick)
    row = QHBoxLayout()
    row.addWidget(field, 1)
    row.addWidget(button)
    return row
