"""Whether a call lets Python's GIL go: for tests of native calls the app makes where
other threads wait for the GIL (the device's copies: tests/test_latent_track.py)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable


def python_run_by_others(calls: Callable[[], object]) -> int:
    """How often a thread counting beside `calls()` ran Python while `calls()` ran. With
    Python's switch interval at 10 s, the caller gives the GIL up only where a call lets
    it go, so the count moves only then."""
    counted, stop = [0], threading.Event()

    def count() -> None:
        while not stop.is_set():
            counted[0] += 1
            stop.wait(0.0002)  # lets the GIL go: the caller is not kept waiting 10 s

    before = sys.getswitchinterval()
    thread = threading.Thread(target=count)
    thread.start()
    try:
        while not counted[0]:
            stop.wait(0.001)
        sys.setswitchinterval(10.0)
        at_start = counted[0]
        calls()
        return counted[0] - at_start
    finally:
        sys.setswitchinterval(before)
        stop.set()
        thread.join()
