"""The settings panel: every knob of the Settings model, validated by the model itself."""

from __future__ import annotations

from dataclasses import asdict

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
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
    QWidget,
)

from app.settings import Settings, validate
from pipeline.audio.devices import Kind, list_devices, list_devices_now
from pipeline.lipsync.model import MIC_TRADES
from pipeline.voice.streaming_tts import LATENCY_MODES

SYSTEM_DEFAULT = "System default"
BUNDLED_AVATAR = ""
# Two different times to first audio, named apart wherever they are shown (here and in
# the window's status line).
SYNTHESIS_FIRST_AUDIO = "synthesis first audio"
HEARD_FIRST_AUDIO = "heard first audio"
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
        form = QFormLayout(self)

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
        form.addRow("Background colour", self.background)

        self.error = QLabel()
        self.error.setStyleSheet("color: #c0392b")
        self.error.setWordWrap(True)
        form.addRow(self.error)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self._result = settings

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
        }

    def _accept(self) -> None:
        settings, problems = validate(self._raw())
        if problems:
            self.error.setText("\n".join(problems))
            return
        self._result = settings
        self.accept()

    def result_settings(self) -> Settings:
        return self._result
