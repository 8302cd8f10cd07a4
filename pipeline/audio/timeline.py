"""Speech placed at absolute sample positions on the output timeline, at the device rate.

A writer puts samples at chosen positions ahead of the read head; the audio callback
copies whatever lies at its positions and leaves silence behind. Because a position is
chosen before the sound plays, its media time is known when it is scheduled.

Positions are absolute (they never wrap); the storage is a preallocated ring, so a
position maps to ``pos % capacity`` and only ``capacity`` samples ahead of the read head
can be held at once. The callback side (``read_into``) only copies and zero-fills
slices: no allocation, no locks. The writer must stay far enough ahead of the read head
that the callback is not reading what it writes (AudioOutput keeps a margin of blocks).
"""

from __future__ import annotations

import numpy as np


class AudioTimeline:
    def __init__(self, sample_rate: int, capacity_seconds: float = 60) -> None:
        if sample_rate <= 0 or capacity_seconds <= 0:
            raise ValueError("sample rate and capacity must be positive")
        self.sample_rate = int(sample_rate)
        self.capacity = int(round(capacity_seconds * sample_rate))
        self._ring = np.zeros(self.capacity, dtype=np.float32)
        self._read_pos = 0
        self._scheduled_end = 0

    @property
    def read_pos(self) -> int:
        """The next position the reader will consume."""
        return self._read_pos

    @property
    def scheduled_end(self) -> int:
        """One past the last position holding written sound (0 when nothing was written)."""
        return self._scheduled_end

    def write(self, pos: int, samples: np.ndarray) -> None:
        """Put mono ``samples`` at absolute position ``pos``, replacing what was there."""
        samples = np.asarray(samples, dtype=np.float32)
        if samples.ndim != 1:
            raise ValueError(f"expected mono samples (1-D), got shape {samples.shape}")
        if pos < self._read_pos:
            raise ValueError(f"position {pos} is behind the read head {self._read_pos}")
        end = pos + len(samples)
        if end > self._read_pos + self.capacity:
            raise ValueError(
                f"samples up to {end} do not fit: the timeline holds {self.capacity} samples "
                f"ahead of the read head {self._read_pos}"
            )
        self._copy_in(pos, samples)
        self._scheduled_end = max(self._scheduled_end, end)

    def read_into(self, pos: int, out: np.ndarray) -> None:
        """Copy ``len(out)`` samples from ``pos`` into ``out`` and leave silence behind.

        ``out`` may be a strided view (one column of a multichannel buffer). Positions
        between the read head and ``pos`` are skipped and silenced.
        """
        n = len(out)
        if pos > self._read_pos:
            self._zero(self._read_pos, min(pos - self._read_pos, self.capacity))
        start = pos % self.capacity
        first = min(n, self.capacity - start)
        out[:first] = self._ring[start:start + first]
        self._ring[start:start + first] = 0.0
        if first < n:
            rest = n - first
            out[first:] = self._ring[:rest]
            self._ring[:rest] = 0.0
        self._read_pos = pos + n

    def discard_from(self, pos: int, fade_samples: int) -> int:
        """Fade linearly to zero over ``fade_samples`` from ``pos``, silence everything after.

        Returns the position where sound ends. A fade instead of a cut: an abrupt step in
        the waveform is heard as a click.
        """
        if pos < self._read_pos:
            raise ValueError(f"position {pos} is behind the read head {self._read_pos}")
        if pos >= self._scheduled_end:
            return self._scheduled_end
        fade_end = min(pos + max(fade_samples, 0), self._scheduled_end)
        if fade_end > pos:
            gain = 1.0 - np.arange(1, fade_end - pos + 1, dtype=np.float32) / (fade_samples + 1)
            self._copy_in(pos, self._take(pos, fade_end - pos) * gain)
        self._zero(fade_end, self._scheduled_end - fade_end)
        self._scheduled_end = fade_end
        return fade_end

    def silence_from(self, pos: int) -> None:
        """Drop everything scheduled from ``pos`` on, without allocating (the audio
        callback calls it)."""
        if pos < self._scheduled_end:
            self._zero(pos, min(self._scheduled_end - pos, self.capacity))
            self._scheduled_end = max(pos, self._read_pos)

    def _copy_in(self, pos: int, samples: np.ndarray) -> None:
        start = pos % self.capacity
        first = min(len(samples), self.capacity - start)
        self._ring[start:start + first] = samples[:first]
        self._ring[:len(samples) - first] = samples[first:]

    def _take(self, pos: int, n: int) -> np.ndarray:
        start = pos % self.capacity
        first = min(n, self.capacity - start)
        return np.concatenate((self._ring[start:start + first], self._ring[:n - first]))

    def _zero(self, pos: int, n: int) -> None:
        start = pos % self.capacity
        first = min(n, self.capacity - start)
        self._ring[start:start + first] = 0.0
        self._ring[:n - first] = 0.0
