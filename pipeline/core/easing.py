"""The one easing curve every stage blends with: the mouth between visemes, the cut of
a speech, the microphone's cross-fade, the photo rig's fall-off around mouth and eyes."""

from __future__ import annotations

import numpy as np


def smoothstep(x, edge0: float = 0.0, edge1: float = 1.0):
    """GLSL's smoothstep(edge0, edge1, x): 0 at or below edge0 (a NaN float too), 1 at or
    above edge1, between them a cubic with zero slope at both edges. `x` is a float
    (the per-frame paths; no array is made) or an array (elementwise)."""
    t = (x - edge0) / (edge1 - edge0)
    if isinstance(t, np.ndarray):
        t = np.clip(t, 0.0, 1.0)
    else:
        # Comparisons, not min/max: half the cost on paths that run every frame.
        t = t if 0.0 < t < 1.0 else (1.0 if t >= 1.0 else 0.0)
    return t * t * (3.0 - 2.0 * t)
