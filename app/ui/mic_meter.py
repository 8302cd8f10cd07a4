"""The microphone's level in the window: a bar, and its figure in a label beside it.

The figure is not drawn on the bar: a progress bar's style draws its text in one colour
over the filled part and another over the rest, so a level near the text's middle split
the figure into two colours, changing 20 times a second."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QWidget

FLOOR_DB = -60
# The widest figure shown: the label is always this wide, so the bar never jumps.
WIDEST = f"mic {FLOOR_DB} dBFS"
OFF = "mic off"
# 60 dB over 48 px: a step of 1.25 dB a pixel, finer than a peak's swing between refreshes.
MIN_BAR_WIDTH = 48


class MicMeter(QWidget):
    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.bar = QProgressBar()
        self.bar.setRange(FLOOR_DB, 0)
        self.bar.setTextVisible(False)
        # Long where the row has room; at the least as wide as a few level steps show.
        self.bar.setMinimumWidth(MIN_BAR_WIDTH)
        self.label = QLabel(OFF)
        self.label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.label.setMinimumWidth(self.label.fontMetrics().horizontalAdvance(WIDEST)
                                   + 2 * self.label.margin())
        self.setToolTip("The microphone's peak level, in dB below full scale")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.bar, 1)
        layout.addWidget(self.label)
        self.show_level(None)

    def show_level(self, peak_db: float | None) -> None:
        """`peak_db` None: the microphone is off."""
        if peak_db is None:
            self.bar.setValue(FLOOR_DB)
            self.label.setText(OFF)
            return
        level = max(FLOOR_DB, min(0, round(peak_db)))
        self.bar.setValue(level)
        self.label.setText(f"mic {level} dBFS")
