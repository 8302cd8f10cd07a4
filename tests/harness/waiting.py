"""Waiting in a test for something another thread or process does."""

from __future__ import annotations

import time


def until(condition, timeout: float, what: str, poll: float = 0.25):
    """`condition()`'s first true value, asked every `poll` seconds; AssertionError naming
    `what` once `timeout` seconds have passed without one (it is asked once more after)."""
    end = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > end:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(poll)
