"""A sprite rig drawn with numpy alone, for machines where the bundled SVG avatar
cannot be rasterised (no Qt: the GPU test machine). Soft-edged shapes give every
layer antialiased, partly transparent edges, which is where compositing differs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from pipeline.core.visemes import OVR_VISEMES


def _ellipse(size: int, cx: float, cy: float, rx: float, ry: float, rgb) -> np.ndarray:
    """Straight-alpha RGBA8: an ellipse (canvas units) with a 1.5-pixel soft edge and a
    colour gradient, on transparent."""
    y, x = (np.mgrid[0:size, 0:size] + 0.5) / size
    distance = np.sqrt(((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2)
    edge = 1.5 / (size * min(rx, ry))
    alpha = np.clip((1.0 - distance) / edge, 0.0, 1.0)
    image = np.zeros((size, size, 4), np.uint8)
    shade = 0.7 + 0.3 * y
    for channel, value in enumerate(rgb):
        image[..., channel] = np.clip(value * shade, 0, 255).astype(np.uint8)
    image[..., 3] = np.round(alpha * 255).astype(np.uint8)
    return image


def _over(*layers: np.ndarray) -> np.ndarray:
    out = np.zeros(layers[0].shape, np.float32)
    for layer in layers:
        a = layer[..., 3:4] / 255.0
        out[..., :3] = layer[..., :3] * a + out[..., :3] * (1 - a)
        out[..., 3:4] = a * 255 + out[..., 3:4] * (1 - a)
    rgb = np.where(out[..., 3:4] > 0, out[..., :3] * 255 / np.maximum(out[..., 3:4], 1e-6), 0)
    return np.concatenate([np.clip(rgb, 0, 255), out[..., 3:4]], axis=2).round().astype(np.uint8)


def drawn_rig(size: int = 256) -> SimpleNamespace:
    """A face, two eyes (open, closed), five mouths shared out over the 15 visemes, and
    two expressions: happy (its own open eyes and a blush overlay) and sad (a tear)."""
    base = _over(_ellipse(size, 0.5, 0.55, 0.38, 0.42, (230, 190, 150)),
                 _ellipse(size, 0.5, 0.2, 0.4, 0.15, (90, 60, 40)))
    eyes_open = _over(_ellipse(size, 0.36, 0.45, 0.06, 0.05, (250, 250, 250)),
                      _ellipse(size, 0.64, 0.45, 0.06, 0.05, (40, 80, 160)))
    eyes_closed = _over(_ellipse(size, 0.36, 0.47, 0.07, 0.012, (120, 70, 50)),
                        _ellipse(size, 0.64, 0.47, 0.07, 0.012, (120, 70, 50)))
    mouths = {f"m{i}": _ellipse(size, 0.5, 0.72, 0.05 + 0.03 * i, 0.01 + 0.02 * i,
                                (150 + 20 * i, 40, 60)) for i in range(5)}
    viseme_to_mouth = {v: f"m{i % 5}" for i, v in enumerate(OVR_VISEMES)}
    happy = SimpleNamespace(
        swaps={"eyes_open": _over(_ellipse(size, 0.36, 0.44, 0.065, 0.025, (60, 40, 30)),
                                  _ellipse(size, 0.64, 0.44, 0.065, 0.025, (60, 40, 30)))},
        overlays=(_over(_ellipse(size, 0.3, 0.6, 0.06, 0.03, (255, 110, 140)),
                        _ellipse(size, 0.7, 0.6, 0.06, 0.03, (255, 110, 140))),))
    sad = SimpleNamespace(swaps={}, overlays=(_ellipse(size, 0.34, 0.55, 0.015, 0.03, (140, 200, 255)),))
    return SimpleNamespace(name="drawn", canvas_size=(size, size), base=base,
                           eyes_open=eyes_open, eyes_closed=eyes_closed, mouths=mouths,
                           viseme_to_mouth=viseme_to_mouth,
                           expressions={"happy": happy, "sad": sad})
