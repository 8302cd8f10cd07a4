"""Background work (synthesis) must never take the CPU from the audio callback or the
display tick. On Linux niceness is per thread and inherited by threads it creates, so a
worker that lowers its own priority before it creates onnxruntime's thread pool lowers
that pool too."""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger(__name__)

# A quarter of a normal thread's CPU share under contention (CFS weights): the display
# and audio come first, yet synthesis keeps ahead of playback on a busy machine.
BACKGROUND_NICENESS = 5


def run_as_background_work() -> None:
    """Lower the calling thread's priority (no-op where the OS has no per-thread nice)."""
    if not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, max(current, BACKGROUND_NICENESS))
    except OSError as exc:
        log.warning("could not lower the synthesis thread's priority: %s", exc)
