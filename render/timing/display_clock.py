"""Where the display tick comes from, and when the frame being rendered will be seen.

A buffer swap that blocks on vertical sync is the best tick there is. Many surfaces
(Xvfb, some compositors, hidden windows) swap as fast as they are asked, and ticking
on those swaps renders at hundreds of frames per second with no relation to the
screen. So the clock first probes: it lets swaps run free for a few frames and looks
at their intervals. About one refresh period, steadily, means the swap blocks: mode
'vsync'. Anything else: mode 'deadline', ticks on a fixed grid t0 + n·period that
never drifts and skips the grid points it missed instead of bunching up.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

VSYNC = "vsync"
DEADLINE = "deadline"


class DisplayClock:
    """Display tick pacing and presentation-time prediction for one surface.

    `period` is the display refresh period in seconds; `now` the monotonic clock.
    """

    def __init__(self, period: float, now: Callable[[], float] = time.monotonic, *,
                 probe_swaps: int = 24, history: int = 600) -> None:
        if period <= 0:
            raise ValueError("period must be positive")
        self.period = float(period)
        self.now = now
        self.probe_swaps = probe_swaps
        self.mode = DEADLINE
        self.probing = True
        self.missed = 0
        self._t0 = 0.0
        self._n = 0
        self._last_swap: float | None = None
        self._last_tick: float | None = None
        self._tick_time = 0.0
        self._swap_intervals = np.zeros(probe_swaps, dtype=np.float64)
        self._swaps_seen = 0
        self._fast_swaps = 0
        self._lateness = np.zeros(history, dtype=np.float64)
        self._lateness_count = 0
        self._tick_unswapped = False
        self._latency_estimate = 0.0

    def start(self, t0: float | None = None) -> None:
        """Anchor the deadline grid at t0 (now by default); the first tick is due at t0."""
        self._t0 = self.now() if t0 is None else t0
        self._n = 0

    def next_deadline(self) -> float:
        """When the next tick is due ('deadline' mode): t0 + n·period."""
        return self._t0 + self._n * self.period

    def on_tick(self, t: float) -> None:
        """A tick happened at t. In deadline mode it consumes the due grid point and
        moves to the first grid point after t, counting the ones skipped."""
        if self.mode == DEADLINE and not self.probing:
            due = self.next_deadline()
            self._record_lateness(t - due)
            after = math.floor((t - self._t0) / self.period) + 1
            if after > self._n + 1:
                self.missed += after - self._n - 1
            self._n = max(self._n + 1, after)
            self._tick_time = due
            self._tick_unswapped = True
        else:
            if self._last_tick is not None and self.mode == VSYNC and not self.probing:
                self._record_lateness(t - self._last_tick - self.period)
            self._tick_time = t
        self._last_tick = t

    def on_swap(self, t: float) -> str | None:
        """A buffer swap completed at t. Returns the new mode when this swap decided or
        changed it, else None."""
        if self._tick_unswapped:
            # Only the first swap after a paced tick shows that tick's latency. A running
            # average (allocation-free) with a small gain: the prediction, and with it
            # the frame phase, glides instead of jumping on one late swap.
            self._tick_unswapped = False
            self._latency_estimate += 0.1 * (t - self._tick_time - self._latency_estimate)
        last, self._last_swap = self._last_swap, t
        if last is None:
            return None
        interval = t - last
        if self.probing:
            self._swap_intervals[self._swaps_seen] = interval
            self._swaps_seen += 1
            if self._swaps_seen < self.probe_swaps:
                return None
            self.probing = False
            self.mode = VSYNC if self._blocks_on_vsync(self._swap_intervals) else DEADLINE
            self.start(t + self.period)
            return self.mode
        if self.mode == VSYNC:
            # Vsync can stop blocking under us (window moved, compositor change): a run
            # of swaps well under one period means it has.
            self._fast_swaps = self._fast_swaps + 1 if interval < 0.7 * self.period else 0
            if self._fast_swaps >= 8:
                return self.fall_back_to_deadline(t)
        return None

    def fall_back_to_deadline(self, t: float) -> str:
        """Switch to deadline pacing from t on (also when vsync swaps stop arriving)."""
        self.probing = False
        self.mode = DEADLINE
        self._fast_swaps = 0
        self.start(t + self.period)
        return self.mode

    def _blocks_on_vsync(self, intervals: np.ndarray) -> bool:
        # Nearest-rank percentiles of a sorted copy: np.percentile's first call costs
        # ~10 ms of imports, which here would make the first paced tick late.
        ranked = np.sort(intervals)
        n = len(ranked)
        p10, p50, p90 = ranked[n // 10], ranked[n // 2], ranked[(9 * n) // 10]
        return abs(p50 - self.period) < 0.1 * self.period and p90 - p10 < 0.15 * self.period

    def _record_lateness(self, seconds: float) -> None:
        self._lateness[self._lateness_count % len(self._lateness)] = seconds
        self._lateness_count += 1

    def predicted_presentation(self) -> float:
        """When the frame rendered for the current tick will be on screen.

        vsync: one refresh after the swap that ticked (double buffering). deadline: the
        tick's grid time plus the measured grid-to-swap latency (running average)."""
        if self.mode == VSYNC and not self.probing:
            return self._tick_time + self.period
        return self._tick_time + self._latency_estimate

    def next_presentation(self) -> float:
        """When the frame of the next tick will be on screen; lets the renderer line its
        frames up with that tick a whole period before the tick needs them."""
        if self.probing:
            return self.now() + self.period
        if self.mode == VSYNC:
            return self._tick_time + 2.0 * self.period
        return self.next_deadline() + self._latency_estimate

    def jitter(self) -> dict[str, float]:
        """Tick lateness percentiles in milliseconds (deadline: vs the grid; vsync: the
        interval's deviation from one period)."""
        n = min(self._lateness_count, len(self._lateness))
        if not n:
            return {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0, "samples": 0}
        lateness = np.abs(self._lateness[:n]) * 1e3
        p50, p99 = np.percentile(lateness, (50, 99))
        return {"p50_ms": float(p50), "p99_ms": float(p99), "max_ms": float(lateness.max()),
                "samples": n}

    def assume_latency(self, seconds: float) -> None:
        """Start the latency estimate at `seconds` (an output that knows how long its
        frames take to be seen), so the first frames are made for the right time rather
        than the estimate's ~40 ticks of settling from 0."""
        self._latency_estimate = seconds

    def latency_ms(self) -> float:
        return self._latency_estimate * 1e3
