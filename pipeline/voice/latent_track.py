"""A sentence's latent frames, where the flow writes them and the vocoder reads windows of
them: on the CPU a host array, on a GPU device memory, so the latents never go down to
the host and up again between the two engines (issue 25: copies per chunk).

Layout, one buffer of `channels` rows: the committed frames [0, frames), then the
lookahead's latents [frames, frames + ahead), made from priors not yet committed. A
flow run writes one contiguous run of columns (what it commits and the lookahead after
it); a later run overwrites the lookahead's columns with committed ones.
"""

from __future__ import annotations

import numpy as np

from pipeline.infer import device_memory
from pipeline.infer.device_memory import DeviceColumns, DeviceMatrix

# Columns a track starts with: the stream's first windows fit (a flow run is at most
# FLOW_WINDOW = 128 frames), and it doubles as a sentence needs (~86 frames a second).
_FIRST_CAPACITY = 256


class LatentTrack:
    """`channels` rows of latent frames, on the device (`on_device`) or the host.

    Written by the flow's runs (`writer`'s functions, given a run's outputs where the
    engine made them: on the device's thread for a device engine), read by `window`
    for the vocoder. `frames` and `ahead` are the stream's to set: the track only holds
    the columns. One stream uses a track at a time."""

    def __init__(self, channels: int, on_device: bool) -> None:
        self.channels = channels
        self.on_device = on_device
        self.frames = 0  # committed latents
        self.ahead = 0  # the lookahead's latents after them
        self._host = np.zeros((channels, 0), np.float32)
        self._device: DeviceMatrix | None = None

    @property
    def capacity(self) -> int:
        return self._device.columns if self._device is not None else self._host.shape[1]

    def clear(self) -> None:
        """Empty, for a new sentence (the buffer is kept)."""
        self.frames = self.ahead = 0

    def writer(self, skip: int, at: int, count: int):
        """What takes a flow run's outputs and writes columns [skip, skip + count) of its
        latents (its only output) at columns [at, at + count)."""
        def write(outputs: list) -> None:
            if count <= 0:
                return
            self._reserve(at + count)
            source = outputs[0]
            if self._device is not None:
                source.columns(skip, count).copy_to(self._device.pointer, self._device.columns, at)
            else:
                self._host[:, at:at + count] = source[0, :, skip:skip + count]
        return write

    def window(self, left: int, width: int, valid: int) -> np.ndarray | DeviceColumns:
        """Columns [left, left + width) as a batch of one (1, channels, width), those
        from `valid` on as zeros: a host array of its own, or DeviceColumns of the
        track's buffer (read before the track is written again)."""
        held = max(0, min(width, valid - left, self.capacity - left))
        if self.on_device:
            # Nothing written yet: zeros, and no allocation off the device's thread.
            if self._device is None:
                return DeviceColumns(0, self.channels, 0, left, width, 0)
            return self._device.columns_of(left, width, held)
        out = np.zeros((1, self.channels, width), np.float32)
        out[0, :, :held] = self._host[:, left:left + held]
        return out

    def _reserve(self, columns: int) -> None:
        """Room for `columns` columns, what is written kept."""
        if columns <= self.capacity:
            return
        size = max(columns, 2 * self.capacity, _FIRST_CAPACITY)
        if not self.on_device:
            grown = np.zeros((self.channels, size), np.float32)
            grown[:, :self.capacity] = self._host
            self._host = grown
            return
        grown_device = DeviceMatrix(self.channels, size)
        if self._device is not None:
            self._device.columns_of(0, self._device.columns, self._device.columns).copy_to(
                grown_device.pointer, size)
            # Before the old buffer goes back to the allocator, which may hand it out again.
            device_memory.synchronize()
        self._device = grown_device
