"""Premultiplied RGBA frames as the GL output gives them, made from straight RGBA, for the
tests of what is sent on (the browser source, its wire format)."""

import numpy as np


def premultiply(straight: np.ndarray) -> np.ndarray:
    s = straight.astype(np.uint32)
    out = s.copy()
    out[..., :3] = (s[..., :3] * s[..., 3:4] + 127) // 255
    return out.astype(np.uint8)


def avatar_frame(w: int, h: int) -> np.ndarray:
    """Premultiplied: transparent background, an opaque textured disc, and an outline
    holding every alpha 1..254 with varied colours (the pixels un-premultiplying touches)."""
    y, x = np.mgrid[0:h, 0:w]
    straight = np.zeros((h, w, 4), np.uint8)
    straight[..., 0] = (x * 7) % 256
    straight[..., 1] = (y * 5) % 256
    straight[..., 2] = (x + y) % 256
    d = np.hypot(x - w / 2, y - h / 2)
    r = min(w, h) * 0.3
    inside = d < r
    straight[..., 3] = np.where(inside, 255, 0)
    ring = (d >= r) & (d < r + 2)
    alphas = (np.arange(ring.sum()) % 254 + 1).astype(np.uint8)
    straight[..., 3][ring] = alphas
    return premultiply(straight)
