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

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPainterPath, QPen

from render.gpu.path_picker import MouthPathPicker
from render.outputs.avatar_surface import AvatarSurface
from render.outputs.background import Background
from render.outputs.contract import OutputStatus

TITLE = "Lipsync Studio — Avatar"


class AvatarWindow(AvatarSurface):
    """A top-level avatar output (render/outputs/contract.py). `closed` (a callable,
    optional) is told when the user closes the window, so the app can remember it is off;
    close() is the app closing it, and tells no one."""

    name = "avatar_window"
    shows_captions = True

    def __init__(self, size: tuple[int, int], *, fps: float = 60.0,
                 background: Background = Background(), borderless: bool = False,
                 on_top: bool = False, now: Callable[[], float] = time.monotonic,
                 mouth_paths: MouthPathPicker | None = None) -> None:
        super().__init__(fps=fps, background=background, now=now, mouth_paths=mouth_paths)
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
        width, height = self.width(), self.height()
        self._caption_font.setPixelSize(max(12, height // 16))
        metrics = QFontMetrics(self._caption_font)
        lines = self._caption.split("\n")
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        # White letters in a dark outline: readable over any background, keyed or not.
        path = QPainterPath()
        y = height - metrics.descent() - height // 30 - (len(lines) - 1) * metrics.lineSpacing()
        for line in lines:
            path.addText((width - metrics.horizontalAdvance(line)) / 2, y, self._caption_font, line)
            y += metrics.lineSpacing()
        painter.strokePath(path, QPen(QColor(0, 0, 0, 230), max(3.0, height / 160)))
        painter.fillPath(path, QColor(255, 255, 255))
        painter.end()

    def status(self) -> OutputStatus:
        stats = self.stats()
        return OutputStatus(self.name, "on", f"window '{TITLE}', {self.width()}x{self.height()}, "
                            f"{stats['fps']:.0f} fps", None, stats)

    def close(self) -> bool:
        self.closed = None
        self.shutdown()
        shut = super().close()
        self.deleteLater()
        return shut

    def closeEvent(self, event) -> None:
        if self.closed is not None:
            self.closed()
        super().closeEvent(event)
