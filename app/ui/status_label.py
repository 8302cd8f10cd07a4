"""The window's status line on screen: wrapped, and as tall as its text needs at the
window's width, so no line of it is cut off whatever the width."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from app.ui.status_line import STATUS_FIRST_AUDIO_NOTE


class StatusLabel(QLabel):
    """Invariant: the label is at least as tall as its wrapped text at its width. At one
    width it only grows, so figures coming and going never resize (and move) the avatar
    with every refresh; a new width fits it to its text anew."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setToolTip(STATUS_FIRST_AUDIO_NOTE)
        self._fitted_width = -1

    def setText(self, text: str) -> None:
        super().setText(text)
        self._fit(grow_only=True)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.width() != self._fitted_width:
            self._fit(grow_only=False)

    def _fit(self, grow_only: bool) -> None:
        self._fitted_width = self.width()
        needed = max(self.heightForWidth(self.width()), self.fontMetrics().lineSpacing())
        self.setFixedHeight(max(needed, self.height()) if grow_only else needed)
