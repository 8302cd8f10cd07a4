"""One setting on screen: the widget that edits it, the name the user knows it by, how
its value is read from and shown in the widget, and the model's word on a value.

The settings panel applies each edit as it is made: a field reports an edit once it is
complete (a box ticked, an entry chosen, Enter or leaving a text field, a spin box's
arrows), so half-typed text is never applied nor refused mid-word.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QLineEdit,
    QSpinBox,
    QWidget,
)

# The model's own check of one field. Private in app.settings for now: the one place
# that says why a value is refused, which the panel words for the user.
from app.settings import check as model_check

SYSTEM_DEFAULT = "System default"
# How a refused field looks: the panel's style sheet marks widgets with this property.
INVALID = "invalid"
INVALID_STYLE = (f'QLineEdit[{INVALID}="true"], QComboBox[{INVALID}="true"] '
                 "{ border: 2px solid #c0392b; }")


@dataclass
class SettingField:
    """`label`: what the user sees the field called (messages name it so, never by
    its key). `read()` the widget's value as the model takes it; `show(value)` puts a
    value in the widget without reporting an edit."""

    name: str
    label: str
    widget: QWidget
    read: Callable[[], Any]
    show: Callable[[Any], None]

    @property
    def refused(self) -> bool:
        return bool(self.widget.property(INVALID))

    def check(self) -> str | None:
        """Why the model refuses what the widget holds, in the user's words (None: it is
        taken), and the field marked so."""
        value = self.read()
        why = model_check(self.name, value)
        text = None if why is None else f"{self.label}: {value!r} {why}. Not applied."
        if self.refused != (text is not None):
            self.widget.setProperty(INVALID, text is not None)
            self.widget.style().unpolish(self.widget)
            self.widget.style().polish(self.widget)
        self.widget.setToolTip(text or self._tooltip)
        return text

    def __post_init__(self) -> None:
        self._tooltip = self.widget.toolTip()


def bind(name: str, label: str, widget: QWidget, on_edit: Callable[[str], None], *,
         optional_text: bool = False, device: bool = False) -> SettingField:
    """A field for `widget` editing setting `name`; `on_edit(name)` once an edit is
    complete. `optional_text`: empty text is None (the bundled avatar, OBS's current
    scene); `device`: a device picker whose SYSTEM_DEFAULT is None."""
    def edited(*_) -> None:
        on_edit(name)

    if isinstance(widget, QCheckBox):
        widget.toggled.connect(edited)
        return SettingField(name, label, widget, widget.isChecked,
                            _quiet(widget, widget.setChecked))
    if isinstance(widget, (QSpinBox, QDoubleSpinBox)):
        # Typed digits count once the field is left or Enter pressed, not per digit.
        widget.setKeyboardTracking(False)
        widget.setCorrectionMode(QAbstractSpinBox.CorrectionMode.CorrectToNearestValue)
        widget.valueChanged.connect(edited)
        return SettingField(name, label, widget, widget.value, _quiet(widget, widget.setValue))
    if isinstance(widget, QComboBox) and device:
        widget.currentIndexChanged.connect(edited)
        def device() -> str | None:
            return None if widget.currentText() == SYSTEM_DEFAULT else widget.currentText()

        return SettingField(name, label, widget, device,
                            _quiet(widget, lambda value: _choose_device(widget, value)))
    if isinstance(widget, QComboBox) and widget.isEditable():
        widget.activated.connect(edited)
        widget.lineEdit().editingFinished.connect(edited)
        return SettingField(name, label, widget, lambda: widget.currentText().strip(),
                            _quiet(widget, widget.setCurrentText))
    if isinstance(widget, QComboBox):
        widget.currentIndexChanged.connect(edited)
        return SettingField(name, label, widget, widget.currentData, _quiet(
            widget, lambda value: widget.setCurrentIndex(widget.findData(value))))
    if isinstance(widget, QLineEdit):
        widget.editingFinished.connect(edited)
        read = ((lambda: widget.text().strip() or None) if optional_text
                else (lambda: widget.text().strip()))
        return SettingField(name, label, widget, read,
                            _quiet(widget, lambda value: widget.setText(value or "")))
    raise TypeError(f"no setting field for a {type(widget).__name__}")


def device_box(devices: list[str], chosen: str | None) -> QComboBox:
    """A device picker; a saved device that is not plugged in now stays listed and
    selected, so opening the panel never changes the choice silently."""
    box = QComboBox()
    list_in(box, devices, chosen)
    return box


def list_in(box: QComboBox, devices: list[str], chosen: str | None) -> None:
    """`devices` in a device picker, `chosen` selected as device_box does; not reported as
    an edit."""
    blocked = box.blockSignals(True)
    try:
        box.clear()
        box.addItem(SYSTEM_DEFAULT)
        box.addItems(devices)
        _choose_device(box, chosen)
    finally:
        box.blockSignals(blocked)


def _choose_device(box: QComboBox, chosen: str | None) -> None:
    if not chosen:
        box.setCurrentIndex(0)
        return
    if box.findText(chosen) < 0:
        box.addItem(chosen)
    box.setCurrentText(chosen)


def _quiet(widget: QWidget, show: Callable[[Any], None]) -> Callable[[Any], None]:
    """`show`, without the widget reporting it as an edit."""

    def shown(value: Any) -> None:
        blocked = widget.blockSignals(True)
        try:
            show(value)
        finally:
            widget.blockSignals(blocked)

    return shown
