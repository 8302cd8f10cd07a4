"""Sample-rate conversion from the voice's rate to the output device's rate."""

from __future__ import annotations

from math import gcd

import numpy as np
from scipy.signal import resample_poly


def resample(audio: np.ndarray, src_rate: int, dst_rate: int) -> np.ndarray:
    """Resample along axis 0 with a polyphase filter; returns float32.

    The ratio is reduced first (22,050 → 48,000 Hz is 320/147) because resample_poly's
    filter length and cost grow with the up/down factors it is given.
    """
    if src_rate <= 0 or dst_rate <= 0:
        raise ValueError(f"sample rates must be positive, got {src_rate} and {dst_rate}")
    audio = np.asarray(audio, dtype=np.float32)
    if src_rate == dst_rate:
        return audio.copy()
    g = gcd(int(src_rate), int(dst_rate))
    return resample_poly(audio, dst_rate // g, src_rate // g, axis=0).astype(np.float32, copy=False)
