"""Float audio as 16-bit PCM, one way for every writer (WAV files, the API's streams),
so the same speech gives the same bytes wherever it is written."""

from __future__ import annotations

import numpy as np


def pcm16(samples: np.ndarray) -> bytes:
    """float32 samples in [-1, 1] (clipped) as little-endian signed 16-bit, scaled by
    32767 and truncated toward zero."""
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
