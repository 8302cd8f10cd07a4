"""A GL context for a bench that draws: a Qt GUI application on an Xvfb of its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gl_session(name: str, platform: str = "offscreen") -> Iterator[str]:
    """A QGuiApplication called `name` on a fresh Xvfb, with QT_QPA_PLATFORM `platform`;
    yields the GL renderer and version (Mesa llvmpipe here), as results name them."""
    from tests.harness.services import Xvfb

    xvfb = Xvfb()
    os.environ["DISPLAY"] = xvfb.display
    os.environ["QT_QPA_PLATFORM"] = platform
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication([name])
    try:
        from OpenGL import GL

        from render.gl.offscreen import OffscreenTarget

        with OffscreenTarget(4, 4):
            gl = f"{GL.glGetString(GL.GL_RENDERER).decode()}, GL {GL.glGetString(GL.GL_VERSION).decode()}"
        yield gl
    finally:
        # Qt's X connection goes before the X server, or Qt aborts the process.
        import shiboken6

        shiboken6.delete(app)
        xvfb.stop()
