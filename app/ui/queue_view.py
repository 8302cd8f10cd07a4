"""The speech queue on screen (app/speech_queue.py): what is being said, what waits, and
Skip, Remove and Clear. Where new lines wait their turn (the "queue" setting) it stays on
screen, empty or not: appearing and going with every line, it resized the avatar above it
each time (507 → 399 px, a stall of the view's frames, seen in the soak). Elsewhere it
shows only while something waits (an API request that asked to queue)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.speech_queue import SpeechQueue

# Rows shown before the list scrolls: the queue must not push the avatar off the window.
VISIBLE_ROWS = 4


class QueueView(QWidget):
    def __init__(self, queue: SpeechQueue, parent=None) -> None:
        super().__init__(parent)
        self.queue = queue
        self.kept_on_screen = False
        self.now = QLabel()
        self.now.setWordWrap(True)
        self.list = QListWidget()
        self.list.setMaximumHeight(VISIBLE_ROWS * self.fontMetrics().lineSpacing() + 12)
        self.skip_button = QPushButton("Skip")
        self.skip_button.setToolTip("Cut what is being said and go on with the next line")
        self.skip_button.clicked.connect(queue.skip)
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("Take the chosen waiting line out of the queue")
        self.remove_button.clicked.connect(self._remove)
        self.clear_button = QPushButton("Clear")
        self.clear_button.setToolTip("Empty the queue and stop speaking")
        self.clear_button.clicked.connect(queue.clear)
        buttons = QHBoxLayout()
        buttons.addWidget(self.now, 1)
        for button in (self.skip_button, self.remove_button, self.clear_button):
            buttons.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(buttons)
        layout.addWidget(self.list)
        self.refresh()

    def keep_on_screen(self, kept: bool) -> None:
        """Whether the view stays on screen while nothing waits (new lines wait their turn)."""
        self.kept_on_screen = kept
        self.refresh()

    def refresh(self) -> None:
        queue = self.queue
        current = queue.current
        self.now.setText(f"Saying: {_short(current.text)}" if current is not None
                         else "Nothing waiting: new lines are read in turn.")
        self.list.clear()
        for entry in queue.waiting:
            item = QListWidgetItem(f"{entry.source}: {_short(entry.text)}")
            item.setData(Qt.ItemDataRole.UserRole, entry.id)
            item.setToolTip(entry.text)
            self.list.addItem(item)
        self.skip_button.setEnabled(current is not None)
        self.remove_button.setEnabled(bool(queue.waiting))
        self.clear_button.setEnabled(current is not None or bool(queue.waiting))
        self.setVisible(self.kept_on_screen or bool(queue.waiting))

    def _remove(self) -> None:
        item = self.list.currentItem() or self.list.item(0)
        if item is not None:
            self.queue.remove(item.data(Qt.ItemDataRole.UserRole))


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
