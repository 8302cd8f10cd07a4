"""The window's messages on screen: the ones true now in an area of fixed height, and
the history of every message in a dialog. What is shown comes from app.messages."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHeaderView,
    QLabel,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.messages import Message, Severity

COLOURS = {Severity.INFO: "#5d6d7e", Severity.WARNING: "#b36b00", Severity.ERROR: "#c0392b"}
MARKS = {Severity.INFO: "ℹ", Severity.WARNING: "⚠", Severity.ERROR: "✖"}
# Lines of text the message area is tall: a message of six lines (a long file path in
# it) is seen whole, and the area never grows (it would shrink and move the avatar).
AREA_LINES = 6


def clock_time(wall: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall))


def message_label(message: Message) -> QLabel:
    label = QLabel()
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    show_severity(label, message)
    return label


def show_severity(label: QLabel, message: Message) -> None:
    """The message's mark, colour and tooltip: again whenever it is shown, since a
    condition reported again in the same words keeps its Message with the latest
    severity (a microphone's "is on" first told as a warning, then as good news)."""
    text = f"{MARKS[message.severity]} {message.text}"
    if label.text() != text:  # a label being read or selected is left alone otherwise
        label.setText(text)
        label.setStyleSheet(f"color: {COLOURS[message.severity]}")
    label.setToolTip(f"{message.severity.value}, {clock_time(message.posted_at)}")


class MessageArea(QScrollArea):
    """The messages true now, newest at the top, each wrapped in full; more than fit
    scroll (the area keeps its height, so the avatar never moves)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setWidgetResizable(True)
        # Wrapping, never sideways scrolling: every line is as wide as the area.
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFixedHeight(AREA_LINES * self.fontMetrics().lineSpacing() + 8)
        content = QWidget()
        self._layout = QVBoxLayout(content)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(2)
        self._layout.addStretch(1)
        self.setWidget(content)
        # A label per message shown, kept while it is shown (so one being read or
        # selected is not swapped for a copy whenever another message comes or goes).
        self.labels: dict[Message, QLabel] = {}

    def show_messages(self, messages: list[Message]) -> None:
        for message in [m for m in self.labels if m not in messages]:
            label = self.labels.pop(message)
            self._layout.removeWidget(label)
            label.hide()  # now, not when the event loop gets to deleting it
            label.deleteLater()
        added = False
        for index, message in enumerate(messages):
            label = self.labels.get(message)
            if label is None:
                label = self.labels[message] = message_label(message)
                added = True
            else:
                show_severity(label, message)
            if self._layout.indexOf(label) != index:
                self._layout.removeWidget(label)
                self._layout.insertWidget(index, label)
        if added:  # the newest message, at the top; one going leaves the reader where they are
            self.verticalScrollBar().setValue(0)


class MessageHistory(QDialog):
    """Every message since start, with its time, its severity and when it went."""

    COLUMNS = ("Time", "Severity", "Message", "Until")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Lipsync Studio messages")
        self.resize(760, 420)
        self.table = QTableWidget(0, len(self.COLUMNS))
        self.table.setHorizontalHeaderLabels(self.COLUMNS)
        self.table.setWordWrap(True)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        for column in (0, 1, 3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)

    def show_history(self, messages: list[Message]) -> None:
        """Newest first, as in the message area."""
        rows = messages[::-1]
        self.table.setRowCount(len(rows))
        for row, message in enumerate(rows):
            until = ("shown now" if message.ended is None
                     else f"{clock_time(message.ended_at)} ({message.ended.value})")
            cells = (clock_time(message.posted_at), message.severity.value, message.text, until)
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if column == 1:
                    item.setForeground(QColor(COLOURS[message.severity]))
                self.table.setItem(row, column, item)
        self.table.resizeRowsToContents()
