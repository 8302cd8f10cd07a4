"""Where the main window is and how large: as it was when last closed (Qt's
saveGeometry, base64, in Settings.window_geometry), or at first start a default size
that fits the screen with the window manager's frame."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QEvent, QObject
from PySide6.QtWidgets import QWidget

# The window's size at first start, made smaller where the screen is: the bottom rows
# must not fall off the screen (the test display, and small laptops, are 720 px tall).
DEFAULT_SIZE = (720, 820)


def place(window: QWidget, geometry: str | None) -> None:
    """Restore `geometry` (from `saved`), or size `window` at DEFAULT_SIZE within the
    screen. Call before the window is shown."""
    if geometry and window.restoreGeometry(QByteArray.fromBase64(geometry.encode("ascii"))):
        return
    window.resize(*DEFAULT_SIZE)
    fit_to_screen(window)
    # A window manager's frame (title bar, borders) is known only once it has framed the
    # window, at the first move after it is shown: fitted again then.
    window.installEventFilter(_FitWhenFramed(window))


def saved(window: QWidget) -> str:
    """The window's place and size as text for the settings."""
    return bytes(window.saveGeometry().toBase64()).decode("ascii")


def fit_to_screen(window: QWidget) -> None:
    """Shrink and move `window` until it and its frame are inside its screen."""
    screen = window.screen().availableGeometry()
    frame, inner = window.frameGeometry(), window.geometry()
    window.resize(min(window.width(), screen.width() - (frame.width() - inner.width())),
                  min(window.height(), screen.height() - (frame.height() - inner.height())))
    frame = window.frameGeometry()
    if not screen.contains(frame):
        window.move(max(screen.left(), min(frame.left(), screen.right() - frame.width() + 1)),
                    max(screen.top(), min(frame.top(), screen.bottom() - frame.height() + 1)))


class _FitWhenFramed(QObject):
    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self._window = window

    def eventFilter(self, watched, event) -> bool:
        # The event's kind first: the window is not to be asked of anything else (its
        # frame) while it is being destroyed, which crashed the process at exit.
        if event.type() != QEvent.Type.Move:
            return False
        if self._window.frameGeometry().size() != self._window.size():
            self._window.removeEventFilter(self)
            fit_to_screen(self._window)
            self.deleteLater()
        return False
