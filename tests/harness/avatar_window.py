"""The avatar window as the tests look at it: at a known size, shown until it has drawn,
and its frames (or any premultiplied QImage) as arrays."""

from __future__ import annotations

import time

import numpy as np

# A small window: every test module that opens one draws it at this size.
WINDOW_SIZE = (320, 240)


def image_pixels(image) -> np.ndarray:
    """A premultiplied RGBA QImage as H×W×4 uint8."""
    from PySide6.QtGui import QImage

    image = image.convertToFormat(QImage.Format.Format_RGBA8888_Premultiplied)
    ptr = image.constBits()
    return np.frombuffer(ptr, np.uint8).reshape(image.height(), image.bytesPerLine() // 4, 4)[
        :, : image.width()].copy()


def show_drawn(qt_app, window) -> None:
    window.show()
    end = time.monotonic() + 10
    while time.monotonic() < end and not (window.gl_ready and window.draws > 2):
        qt_app.processEvents()
        time.sleep(0.002)
    assert window.gl_ready and window.draws > 2, "the avatar window never drew"
