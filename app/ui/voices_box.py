"""The settings' voices: the catalogue's list (name, language, quality), "Add voice…",
the speaker of a multi-speaker voice and the selected voice's own speaking rate.

Its contract is the settings panel's: it shows `current()`'s settings, emits
`changed(settings)` with whole new settings on each edit, and `show_settings` shows
settings changed elsewhere. A voice that cannot be used is never offered: the
catalogue's problems, and an added voice's, are shown under the list instead. Adding
copies and checks ~60 MB (~220 ms on the 2-core VM), so it runs on a thread of its own
while the box says so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.settings import Settings, validate
from app.voices import Voice, add_voice, catalogue, choose_voice, speech_rate, voices_folder
from pipeline.voice.voice_files import BUNDLED_VOICE, VoiceError

PROBLEM_STYLE = "color: #c0392b"


class VoicesBox(QWidget):
    """Invariant: the selected row is the voice the settings shown name (None: the
    bundled one; no row for one that cannot be used); the speaker and rate shown are
    that voice's."""

    changed = Signal(object)
    # An "Add voice…" is done: the Voice added, or None (its problem shown).
    added = Signal(object)
    # From the adding thread to the GUI thread (queued): the Voice, or the problem.
    _add_done = Signal(object)

    def __init__(self, current: Callable[[], Settings], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._current = current
        self._voices: list[Voice] = []
        self._choices: list[str | None] = []  # what Settings.voice says for each listed voice
        self._showing = False  # filling the widgets from settings: no edit to hand on
        self.list = QTreeWidget()
        self.list.setHeaderLabels(["Voice", "Language", "Quality"])
        self.list.setRootIsDecorated(False)
        self.list.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.list.itemSelectionChanged.connect(self._picked)
        self.add_button = QPushButton("Add voice…")
        self.add_button.setToolTip(f"Copy a piper voice (its .onnx and .onnx.json) into "
                                   f"{voices_folder()}")
        self.add_button.clicked.connect(self._browse)
        self.adding = QLabel()
        self.adding.hide()
        self._add_done.connect(self._on_added)
        self.problems = QLabel()
        self.problems.setStyleSheet(PROBLEM_STYLE)
        self.problems.setWordWrap(True)
        self.problems.setTextFormat(Qt.TextFormat.PlainText)
        self.speaker = QComboBox()
        self.speaker.currentIndexChanged.connect(self._speaker_picked)
        self.own_rate = QCheckBox("Own speaking rate")
        self.own_rate.setToolTip("Off: the voice speaks at the general speaking rate")
        self.own_rate.toggled.connect(self._rate_edited)
        self.rate = QDoubleSpinBox(minimum=0.5, maximum=2.0, singleStep=0.05, decimals=2)
        self.rate.editingFinished.connect(self._rate_edited)
        rate_row = QHBoxLayout()
        rate_row.addWidget(self.own_rate)
        rate_row.addWidget(self.rate, 1)
        form = QFormLayout()
        form.addRow("Speaker", self.speaker)
        form.addRow("Rate", rate_row)
        buttons = QHBoxLayout()
        buttons.addWidget(self.adding, 1)
        buttons.addWidget(self.add_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.list)
        layout.addLayout(buttons)
        layout.addWidget(self.problems)
        layout.addLayout(form)
        self.refresh()

    # -- showing --------------------------------------------------------------------

    def refresh(self, problem: str | None = None, settings: Settings | None = None) -> None:
        """List the catalogue again (and `problem`, one to say besides its own), showing
        `settings` (None: current()'s)."""
        found = catalogue()
        settings = self._current() if settings is None else settings
        problems = list(found.problems.values())
        voices = list(found.voices)
        choices = [None if voice.bundled else voice.name for voice in voices]
        if settings.voice is not None and found.named(settings.voice) is None:
            # Chosen by path, outside the folder: listed too while it is the choice.
            try:
                voices.append(choose_voice(settings.voice))
                choices.append(settings.voice)
            except VoiceError as exc:
                problems.insert(0, str(exc))
        self._voices, self._choices = voices, choices
        self._showing = True
        self.list.clear()
        for voice in voices:
            item = QTreeWidgetItem([voice.name, voice.language, voice.quality or "—"])
            item.setToolTip(0, str(voice.path))
            self.list.addTopLevelItem(item)
        self._showing = False
        self.problems.setText("\n".join(([problem] if problem else []) + problems))
        self.problems.setVisible(bool(self.problems.text()))
        self._show(settings)

    def show_settings(self, settings: Settings) -> None:
        """Select the voice `settings` name and show its speaker and rate; a voice not
        listed yet (added elsewhere: the library, the folder) lists the catalogue again."""
        if self._index_of(settings.voice) is None:
            self.refresh(settings=settings)
        else:
            self._show(settings)

    def _show(self, settings: Settings) -> None:
        self._showing = True
        try:
            index = self._index_of(settings.voice)
            # A voice that cannot be used (its problem shown) has no row: none is selected.
            self.list.setCurrentItem(None if index is None else self.list.topLevelItem(index))
            voice = self.selected
            self.speaker.clear()
            if voice is not None:
                for number in range(len(voice.speakers)):
                    self.speaker.addItem(voice.speaker_label(number), number)
                if voice.speakers and settings.voice_speaker < len(voice.speakers):
                    self.speaker.setCurrentIndex(settings.voice_speaker)
            self.speaker.setEnabled(self.speaker.count() > 1)
            if not self.speaker.isEnabled():
                self.speaker.addItem("one speaker")
            own = voice is not None and voice.name in settings.voice_rates
            self.own_rate.setChecked(own)
            self.rate.setEnabled(own)
            self.rate.setValue(speech_rate(settings, voice.name) if voice is not None
                               else settings.speech_rate)
        finally:
            self._showing = False

    @property
    def selected(self) -> Voice | None:
        item = self.list.currentItem()
        return None if item is None else self._voices[self.list.indexOfTopLevelItem(item)]

    def _index_of(self, choice: str | None) -> int | None:
        choice = None if choice == BUNDLED_VOICE.name else choice
        return self._choices.index(choice) if choice in self._choices else None

    # -- editing --------------------------------------------------------------------

    def add(self, path: str) -> None:
        """Copy the voice at `path` into the voices folder and select it, on a thread;
        `added` tells when it is done. One that cannot be used is refused with its
        problem shown, and the voice in use stays."""
        self.add_button.setEnabled(False)
        self.adding.setText(f"Adding {path}…")
        self.adding.show()
        threading.Thread(target=self._add, args=(path,), name="voice-add", daemon=True).start()

    def _add(self, path: str) -> None:
        try:
            self._add_done.emit(add_voice(path))
        except VoiceError as exc:
            self._add_done.emit(str(exc))

    def _on_added(self, outcome: Voice | str) -> None:
        self.add_button.setEnabled(True)
        self.adding.hide()
        if isinstance(outcome, str):
            self.refresh(outcome)
            self.added.emit(None)
            return
        self._take({"voice": outcome.name, "voice_speaker": 0})
        self.refresh()
        self.added.emit(outcome)

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Add a piper voice", "",
                                              "Piper voice (*.onnx *.onnx.json)")
        if path:
            self.add(path)

    def _picked(self) -> None:
        voice = self.selected
        if self._showing or voice is None:
            return
        choice = self._choices[self.list.indexOfTopLevelItem(self.list.currentItem())]
        if choice == self._current().voice:
            return
        self._take({"voice": choice, "voice_speaker": 0})
        self.show_settings(self._current())

    def _speaker_picked(self, index: int) -> None:
        if self._showing or not self.speaker.isEnabled() or index < 0:
            return
        self._take({"voice_speaker": self.speaker.currentData()})

    def _rate_edited(self) -> None:
        voice = self.selected
        if self._showing or voice is None:
            return
        rates = dict(self._current().voice_rates)
        if self.own_rate.isChecked():
            rates[voice.name] = round(self.rate.value(), 2)
        else:
            rates.pop(voice.name, None)
        self.rate.setEnabled(self.own_rate.isChecked())
        self._take({"voice_rates": rates})

    def _take(self, values: dict) -> None:
        current = self._current()
        settings, _ = validate({**asdict(current), **values})
        if settings != current:
            self.changed.emit(settings)
