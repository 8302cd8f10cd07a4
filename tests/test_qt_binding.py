"""Guards the Qt binding itself: PySide6 6.12.0 on Python 3.11 released a reference to
None in every void call, and the app died after a few minutes of ticking."""

import sys

from PySide6.QtCore import QTimer


def test_void_qt_calls_keep_none_alive(qt_app):
    timer = QTimer(qt_app)
    before = sys.getrefcount(None)
    for _ in range(2000):
        timer.setInterval(5)
        timer.start(5)
        timer.stop()
    assert sys.getrefcount(None) - before > -100
