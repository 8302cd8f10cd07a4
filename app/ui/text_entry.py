"""The text box: Enter speaks and clears it; Up and Down bring back the lines said
before, as a shell does (the line being typed is kept while browsing)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLineEdit

# Lines kept for Up: a stream's worth; older ones go first.
HISTORY = 200


class TextEntry(QLineEdit):
    """`submitted(text)` on Enter with the text, which then clears from the box."""

    submitted = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.history: list[str] = []
        self._browsing: int | None = None  # index into history while browsing
        self._draft = ""
        self.returnPressed.connect(self._submit)

    def _submit(self) -> None:
        text = self.text()
        self.submitted.emit(text)

    def accept_line(self, text: str) -> None:
        """The line was taken (spoken): keep it for Up and clear the box."""
        if text.strip() and (not self.history or self.history[-1] != text):
            self.history = (self.history + [text])[-HISTORY:]
        self._browsing = None
        self.clear()

    def keyPressEvent(self, event) -> None:
        key = event.key()
        if key == Qt.Key.Key_Up and self.history:
            if self._browsing is None:
                self._draft, self._browsing = self.text(), len(self.history)
            self._browsing = max(0, self._browsing - 1)
            self.setText(self.history[self._browsing])
            return
        if key == Qt.Key.Key_Down and self._browsing is not None:
            self._browsing += 1
            if self._browsing >= len(self.history):
                self._browsing = None
                self.setText(self._draft)
            else:
                self.setText(self.history[self._browsing])
            return
        super().keyPressEvent(event)
