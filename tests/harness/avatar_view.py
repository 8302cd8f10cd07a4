"""The avatar view as its tests drive it: the event loop run for a while (or until
something holds), and the view's pixels at the synthetic rig's size."""

from __future__ import annotations

import time

import numpy as np

from tests.harness.synthetic_rig import H, W


def run_for(app, seconds: float, until=None) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not (until and until()):
        app.processEvents()
        time.sleep(0.0005)


def grabbed(view) -> np.ndarray:
    from PySide6.QtGui import QImage

    img = view.grab().convertToFormat(QImage.Format.Format_RGBA8888)
    assert (img.width(), img.height()) == (W, H)
    return np.frombuffer(img.constBits(), dtype=np.uint8).reshape(H, W, 4).copy()
