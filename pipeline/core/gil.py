"""How soon a thread that wants Python's GIL gets it while other threads run Python.

A thread that waits for the GIL (after a native call that released it, or a wake-up)
asks its holder to drop it only after the interpreter's switch interval, 5 ms by
default. The threads that must run on time set it lower, process-wide; none raises it
back, so the lowest any part asked for holds.
"""

from __future__ import annotations

import sys

# What the audio threads ask for: at 5 ms a busy thread held the GIL past a whole 5.3 ms
# JACK period (hundreds of xruns in 3 s), at 1 ms none (pipeline/audio/output.py).
AUDIO_SWITCH_INTERVAL_S = 0.001


def hand_over_within(seconds: float) -> None:
    """Make a busy thread give the GIL up to one waiting for it within about `seconds`
    (never longer than another part of the process already asked for)."""
    sys.setswitchinterval(min(sys.getswitchinterval(), seconds))
