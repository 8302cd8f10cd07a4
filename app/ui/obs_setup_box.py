"""The settings panel's "Add to OBS": the OBS password field, the button, and what it did.

It runs `obs setup`'s own code (app/obs/command.py add_to_obs) on a worker thread, with
the values in the panel's fields, and shows its lines when it is done; a connection to an
OBS that is away can take the link's reconnect time, and the panel stays responsive.
What it did is a scrolling text of its own, however many lines it has (a setup says ten
or so), and a problem is told with this window's remedy (which field to fill), not the
command line's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtGui import QFontMetrics, QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.obs.command import add_to_obs
from app.obs.credentials import CredentialError
from app.obs.connection import ObsError, PasswordError
from app.settings import Settings

# Lines of the result shown at once; more scroll (a QTextEdit: by pixels, so a line is
# never left half shown). Six fit whole in the Outputs tab of the panel at the size it
# opens at (530x458 here, the tab's view 338 px high), with the fields above in view too.
RESULT_LINES = 6


class ObsSetupBox(QWidget):
    """`settings()` gives the panel's current (validated) settings, or None with the
    panel showing why. `finished(succeeded, text)` reaches the GUI thread when an attempt
    ends; `succeeded` keeps its outcome (None while one runs)."""

    # Emitted from the worker; its receivers live on the GUI thread, so Qt queues it there.
    finished = Signal(bool, str)

    def __init__(self, settings: Callable[[], Settings | None], parent=None) -> None:
        super().__init__(parent)
        self._settings = settings
        self.password = QLineEdit()
        self.password.setEchoMode(QLineEdit.EchoMode.Password)
        self.password.setPlaceholderText("obs-websocket password (kept from last time if empty)")
        self.button = QPushButton("Add to OBS")
        self.button.setToolTip("Add the avatar to the OBS scene (window capture, chroma key) "
                               "and set the microphone's sync offset; OBS must be running "
                               "with its WebSocket server on (Tools → WebSocket Server Settings)")
        self.button.clicked.connect(self.add)
        self.result = QTextEdit()
        self.result.setReadOnly(True)
        self.result.setFrameShape(QFrame.Shape.NoFrame)
        self.result.setLineWrapMode(QTextEdit.LineWrapMode.WidgetWidth)
        self.result.setFixedHeight(QFontMetrics(self.result.font()).lineSpacing() * RESULT_LINES
                                   + 2 * round(self.result.document().documentMargin()))
        self.result.hide()  # until there is something to say
        row = QHBoxLayout()
        row.addWidget(self.password, 1)
        row.addWidget(self.button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.result)
        self.finished.connect(self._show)
        self.succeeded: bool | None = None
        self.worker: threading.Thread | None = None

    def add(self) -> None:
        settings = self._settings()
        if settings is None:
            return
        password = self.password.text() or None
        self.button.setEnabled(False)
        self.succeeded = None
        self._say(f"Connecting to OBS at {settings.obs_host}:{settings.obs_port}…", "")
        self.worker = threading.Thread(target=self._run, args=(settings, password),
                                       name="obs-setup", daemon=True)
        self.worker.start()

    def _run(self, settings: Settings, password: str | None) -> None:
        lines: list[str] = []
        try:
            add_to_obs(settings, lines.append, password=password)
        except PasswordError as exc:
            how = ("type it in the password field beside Add to OBS, then press Add to OBS again"
                   if exc.missing else "type the right one in the password field beside Add to "
                   "OBS, then press Add to OBS again")
            self.finished.emit(False, "\n".join([*lines, f"Not added: {exc.advice(how)}"]))
        except (ObsError, CredentialError) as exc:
            self.finished.emit(False, "\n".join([*lines, f"Not added: {exc}"]))
        else:
            self.finished.emit(True, "\n".join(lines))

    def _show(self, succeeded: bool, text: str) -> None:
        self.succeeded = succeeded
        self._say(text, "" if succeeded else "color: #c0392b")
        if not succeeded:  # the problem is the last line: in view, what led to it above
            self.result.moveCursor(QTextCursor.MoveOperation.End)
            self.result.ensureCursorVisible()
        self.button.setEnabled(True)

    def _say(self, text: str, style: str) -> None:
        self.result.setStyleSheet(style)
        self.result.setPlainText(text)
        self.result.show()
