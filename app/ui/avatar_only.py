"""The main window with its controls hidden, so the avatar alone fills it (for a
window capture, or a small window beside a game): View → Hide controls or its shortcut,
and back by the shortcut, Esc, a double click or the right-click menu. The window's
title says how while they are hidden, since no menu is left to look in."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLayout, QMainWindow, QMenu, QStyle, QWidget

SHORTCUT = QKeySequence("Ctrl+Shift+H")


class AvatarOnly(QObject):
    """`changed(hidden)` after the user hid or showed the controls."""

    changed = Signal(bool)

    def __init__(self, window: QMainWindow, controls: QWidget, layout: QLayout) -> None:
        super().__init__(window)
        self._window, self._controls, self._layout = window, controls, layout
        self._title = window.windowTitle()
        self.action = QAction("Hide controls", window)
        self.action.setCheckable(True)
        self.action.setShortcut(SHORTCUT)
        # On the window, not only in its menu: the shortcut must work with the menu hidden.
        self.action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.action.toggled.connect(self._toggled)
        window.addAction(self.action)
        window.menuBar().addMenu("&View").addAction(self.action)
        window.installEventFilter(self)

    @property
    def hidden(self) -> bool:
        return self.action.isChecked()

    def show_hidden(self, hidden: bool) -> None:
        """Hide or show the controls without reporting it (the settings at start)."""
        blocked = self.blockSignals(True)
        try:
            self.action.setChecked(hidden)
            self._show(hidden)
        finally:
            self.blockSignals(blocked)

    def _toggled(self, hidden: bool) -> None:
        self._show(hidden)
        self.changed.emit(hidden)

    def _show(self, hidden: bool) -> None:
        self._controls.setVisible(not hidden)
        self._window.menuBar().setVisible(not hidden)
        margin = 0 if hidden else self._window.style().pixelMetric(
            QStyle.PixelMetric.PM_LayoutLeftMargin)
        self._layout.setContentsMargins(margin, margin, margin, margin)
        shortcut = SHORTCUT.toString(QKeySequence.SequenceFormat.NativeText)
        self._window.setWindowTitle(f"{self._title} — {shortcut} or Esc shows the controls"
                                    if hidden else self._title)

    def eventFilter(self, watched, event) -> bool:
        kind = event.type()
        # Nothing else looked at for other events: the window sends some while it is
        # destroyed, and asking its parts then crashed the process at exit.
        if kind not in (QEvent.Type.MouseButtonDblClick, QEvent.Type.KeyPress,
                        QEvent.Type.ContextMenu):
            return False
        if self.hidden and (kind == QEvent.Type.MouseButtonDblClick or (
                kind == QEvent.Type.KeyPress and event.key() == Qt.Key.Key_Escape)):
            self.action.setChecked(False)
            return True
        if kind == QEvent.Type.ContextMenu:
            menu = QMenu(self._window)
            menu.addAction(self.action)
            menu.exec(event.globalPos())
            return True
        return False
