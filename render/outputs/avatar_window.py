"""The avatar-only window OBS captures: `Lipsync Studio — Avatar`, the avatar and nothing
else, at a chosen size, optionally borderless and always on top.

It is an AvatarSurface of its own (its own presenter and ticks on the same media clock as
the main window's view), so capturing it never shows the text box, buttons or status
lines. Transparent backgrounds reach OBS through the window's 32-bit ARGB visual
(premultiplied alpha, what X compositing and OBS's window capture read).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPen

from render.outputs.avatar_surface import AvatarSurface
from render.outputs.background import Background

TITLE = "Lipsync Studio — Avatar"


class AvatarWindow(AvatarSurface):
    """A top-level avatar output. `closed` (a callable, optional) is told when the user
    closes the window, so the app can remember it is off."""

    def __init__(self, size: tuple[int, int], *, fps: float = 60.0,
                 background: Background = Background(), borderless: bool = False,
                 on_top: bool = False, now: Callable[[], float] = time.monotonic) -> None:
        super().__init__(fps=fps, background=background, now=now)
        self.setTitle(TITLE)
        self.resize(*size)
        self.set_window_flags(borderless, on_top)
        self.closed: Callable[[], None] | None = None
        self._caption = ""
        self._caption_font = QFont()
        self.after_draw = self._paint_caption

    def set_window_flags(self, borderless: bool, on_top: bool) -> None:
        """Frame and stacking; a shown window is shown again with them (X11 needs that)."""
        visible = self.isVisible()
        self.setFlag(Qt.WindowType.FramelessWindowHint, borderless)
        self.setFlag(Qt.WindowType.WindowStaysOnTopHint, on_top)
        if visible:
            self.show()

    def set_size(self, size: tuple[int, int]) -> None:
        self.resize(*size)

    def set_caption(self, text: str) -> None:
        """Caption text drawn over the bottom of the avatar ('' for none), from the next
        frame on."""
        self._caption = text

    def _paint_caption(self, surface: AvatarSurface) -> None:
        if not self._caption:
            return
        painter = QPainter(self)
        height = self.height()
        self._caption_font.setPixelSize(max(12, height // 18))
        painter.setFont(self._caption_font)
        box = QRect(0, int(height * 0.78), self.width(), int(height * 0.2))
        flags = Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextWordWrap
        # A dark outline keeps white text readable on any background, keyed or not.
        painter.setPen(QPen(QColor(0, 0, 0, 230)))
        for dx, dy in ((-2, 0), (2, 0), (0, -2), (0, 2)):
            painter.drawText(box.translated(dx, dy), flags, self._caption)
        painter.setPen(QPen(QColor(255, 255, 255)))
        painter.drawText(box, flags, self._caption)
        painter.end()

    def closeEvent(self, event) -> None:
        if self.closed is not None:
            self.closed()
        super().closeEvent(event)
