"""A sprite rig made of flat boxes at a small canvas (W×H), where every layer's pixels are
known: the sprite renderer's and the avatar view's tests draw it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

W, H = 160, 120
MOUTH_BOX = (slice(80, 100), slice(60, 100))   # rows, cols
EYES_BOX = (slice(30, 45), slice(40, 120))


@dataclass
class SyntheticRig:
    """The shape render/rigs/sprite.py will load from SVG: canvas-sized straight-alpha layers."""

    canvas_size: tuple[int, int] = (W, H)
    base: np.ndarray = field(default=None)
    eyes_open: np.ndarray = field(default=None)
    eyes_closed: np.ndarray = field(default=None)
    mouths: dict = field(default_factory=dict)
    viseme_to_mouth: dict = field(default_factory=dict)
    expressions: dict = field(default_factory=dict)


def layer(box=None, rgba=(0, 0, 0, 0)) -> np.ndarray:
    img = np.zeros((H, W, 4), dtype=np.uint8)
    if box is not None:
        img[box] = rgba
    return img


def synthetic_rig() -> SyntheticRig:
    base = layer((slice(10, 115), slice(30, 130)), (230, 190, 160, 255))
    return SyntheticRig(
        base=base,
        eyes_open=layer(EYES_BOX, (255, 255, 255, 255)),
        eyes_closed=layer(EYES_BOX, (120, 60, 40, 255)),
        mouths={"closed": layer((slice(88, 92), slice(60, 100)), (90, 20, 20, 255)),
                "open": layer(MOUTH_BOX, (20, 0, 0, 255)),
                "round": layer((slice(82, 98), slice(72, 88)), (40, 0, 60, 255))},
        viseme_to_mouth={"sil": "closed", "PP": "closed", "aa": "open", "ou": "round"},
    )
