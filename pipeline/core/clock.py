"""The one media clock of the app: the audio output clock, seen from time.monotonic().

Media time is the position on the output timeline (sample position / device rate) in
seconds. The audio callback reports, for the first sample of each block, the monotonic
instant at which that sample reaches the DAC; the renderer asks which media time the
listener hears at a monotonic instant. Between callbacks the mapping is linear with
slope 1: device clocks differ from the system clock by at most a few hundred ppm, which
is well under a microsecond across one block, and the per-block update absorbs it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


class MediaClock:
    """Maps monotonic time to media time, locked to the audio device when there is one.

    The clock keeps one number, the *origin*: the monotonic instant at which media time 0
    is (or would have been) heard. ``media_time_at(t) = t - origin``.

    Until the first output block arrives, and after ``start_free_running()``, the clock
    free-runs so the avatar still animates without a sound device. The first block after
    that locks it to the device.

    Smoothing: the DAC time the callback reports is converted to monotonic time with an
    offset measured inside the callback, and a callback can only run late (scheduling,
    waiting for the GIL), never early. So the least-delayed recent callback is the truest:
    the origin is the minimum of the observed origins over the last one to two windows
    of ``window`` seconds. Taking the minimum over a window rather than for ever lets the
    estimate follow a device clock that runs slow against the system clock (the lag is
    at most the drift over two windows: 0.1 ms at 250 ppm).

    A deviation past ``jump_threshold`` is a real jump (an xrun, a device restart) when it
    is early, when the caller says so (``discontinuity``), or when ``jump_confirm`` blocks
    in a row agree on it; a lone late spike is ignored.
    """

    def __init__(
        self,
        sample_rate: int,
        *,
        now: Callable[[], float] = time.monotonic,
        window: float = 1.0,
        jump_threshold: float = 0.002,
        jump_confirm: int = 8,
    ) -> None:
        if sample_rate <= 0:
            raise ValueError(f"sample rate must be positive, got {sample_rate}")
        self.sample_rate = int(sample_rate)
        self._now = now
        self._window = window
        self._jump_threshold = jump_threshold
        self._jump_confirm = jump_confirm
        self._origin = now()
        self._free_running = True
        self._previous_min = math.inf
        self._current_min = math.inf
        self._window_end = 0.0
        self._late_streak = 0
        self._late_streak_min = 0.0
        self.blocks = 0
        self.anchors = 0  # times the mapping was set outright, the first lock included

    @property
    def free_running(self) -> bool:
        return self._free_running

    def start_free_running(self) -> None:
        """Keep media time running on the system clock from where it is now (device lost)."""
        self._free_running = True

    def on_output_block(
        self, first_sample_pos: int, dac_time: float, discontinuity: bool = False
    ) -> None:
        """Sample ``first_sample_pos`` reaches the DAC at monotonic time ``dac_time``.

        Called from the audio callback: arithmetic on floats only.
        """
        self.blocks += 1
        media = first_sample_pos / self.sample_rate
        observed = dac_time - media
        if self._free_running or discontinuity:
            self._anchor(observed, media)
            return
        error = observed - self._origin
        if error < -self._jump_threshold:
            self._anchor(observed, media)
            return
        if error > self._jump_threshold:
            if self._late_streak == 0 or observed < self._late_streak_min:
                self._late_streak_min = observed
            self._late_streak += 1
            if self._late_streak >= self._jump_confirm:
                self._anchor(self._late_streak_min, media)
            return
        self._late_streak = 0
        if media >= self._window_end:
            self._previous_min = self._current_min
            self._current_min = math.inf
            self._window_end = media + self._window
        if observed < self._current_min:
            self._current_min = observed
        self._origin = min(self._previous_min, self._current_min)

    def _anchor(self, origin: float, media: float) -> None:
        self._origin = origin
        self._previous_min = math.inf
        self._current_min = origin
        self._window_end = media + self._window
        self._free_running = False
        self._late_streak = 0
        self.anchors += 1

    def media_time_at(self, t_monotonic: float) -> float:
        """Seconds on the output timeline that the listener hears at ``t_monotonic``."""
        return t_monotonic - self._origin

    def monotonic_at(self, media_time: float) -> float:
        """The monotonic instant at which ``media_time`` is heard (inverse of media_time_at)."""
        return media_time + self._origin

    def media_time_now(self) -> float:
        return self.media_time_at(self._now())
