"""The colours of a photo rig's mouth interior, taken from the portrait itself.

The opening the rig draws between the lips (throat, tongue, drawn teeth: shaders/
photo_cavity.frag, shaders/photo_mouth.cu) has no pixels of its own in the picture, so
its colours come from the lips and the skin around them, read at the landmarks:

* the throat and the mouth's edge are the lips' own colour darkened, so they keep the
  lips' hue and saturation: a greyscale photo gets a grey mouth, a green-lipped alien a
  green one;
* the tongue is the lips' colour, a little darker;
* drawn teeth are the skin's colour with most of its saturation taken out, as bright as
  the brightest skin near the mouth and no brighter: a dim picture gets dim teeth.

Every colour is a scaled or desaturated picture colour, so none is more saturated than
the lips it comes from. A flat picture (a cartoon: most of the skin around the mouth is
one colour) gets flat colours: `shading` 0 takes the gradients out of the throat and the
teeth; a photo keeps them (shading 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from pipeline.core.easing import smoothstep
from pipeline.face.landmarks import PortraitError

# Darkening of the lips' colour. The tongue is a little darker than the lips; edge and
# throat keep the brightness ratios of the fixed colours these replace (red channels:
# edge 0.42, throat 0.13, tongue 0.66, so 0.64 and 0.2 of the tongue's).
TONGUE = 0.9
EDGE = 0.57
THROAT = 0.18
# A flat mouth is one colour, this share of the way from the throat's to the edge's.
FLAT_MOUTH = 0.6
# Teeth keep this share of the skin's chroma: the fixed teeth (0.9, 0.88, 0.83) had
# max - min 0.07 where the astronaut's skin around the mouth has 0.23.
TEETH_CHROMA = 0.25
# Teeth brightness: this percentile of the skin's luma around the mouth, at most 0.9
# (the fixed teeth's).
TEETH_PERCENTILE = 98
TEETH_MAX = 0.9
# The skin ring around the outer lip, in scales of the lip contour about its centre.
SKIN_RING = 1.7
# Share of the skin ring's pixels in its commonest colour, measured: 0.003 on the
# astronaut, 0.027 on it made grey, 0.44 on it posterised (median 7, 12 colours), 0.009 on
# tests/harness/drawn_portrait.py's patterned skin, 0.999 on its flat one. Shading fades
# out from FLAT_SHARE[0] and is gone at FLAT_SHARE[1].
FLAT_SHARE = (0.3, 0.7)
# Luma of sRGB values (Rec. 601 weights), as the teeth's brightness and the lips' are read.
REC601 = np.array([0.299, 0.587, 0.114])


@dataclass(frozen=True)
class MouthColours:
    """sRGB colours in 0..1 for the mouth opening. Invariant: edge, throat and tongue are
    the lips' colour scaled by at most 1 (same hue and saturation); teeth have at most
    the skin's saturation and at most TEETH_MAX luma; shading lies in 0..1."""

    edge: tuple[float, float, float]
    throat: tuple[float, float, float]
    tongue: tuple[float, float, float]
    teeth: tuple[float, float, float]
    shading: float

    def as_array(self) -> np.ndarray:
        """edge, throat, tongue, teeth (rgb each) and shading: 13 float32, the order the
        CUDA kernel's parameter record holds them."""
        return np.array([*self.edge, *self.throat, *self.tongue, *self.teeth, self.shading], np.float32)


def mouth_colours(image: np.ndarray, outer_lip: np.ndarray, inner_lip: np.ndarray) -> MouthColours:
    """The colours for a picture (H×W×4 uint8 RGBA) from its lip contours (N×2 pixels,
    closed polygons). PortraitError where the lips or the skin around them are
    transparent."""
    centre = outer_lip.mean(axis=0)
    ring_edge = centre + SKIN_RING * (outer_lip - centre)
    image, (outer_lip, inner_lip, ring_edge) = crop_around(image, ring_edge, (outer_lip, inner_lip, ring_edge))
    h, w = image.shape[:2]
    lips = polygon_mask((w, h), outer_lip) & ~polygon_mask((w, h), inner_lip)
    ring = polygon_mask((w, h), ring_edge) & ~polygon_mask((w, h), outer_lip)
    opaque = image[..., 3] > 127
    if not (lips & opaque).any() or not (ring & opaque).any():
        raise PortraitError("The mouth or the skin around it is transparent in the picture; "
                            "use a picture where the face is opaque.")
    skin_8 = image[..., :3][ring & opaque]
    skin_px = skin_8 / 255.0
    lip = np.median(image[..., :3][lips & opaque] / 255.0, axis=0)
    skin = np.median(skin_px, axis=0)

    _, counts = np.unique(skin_8, axis=0, return_counts=True)
    shading = 1.0 - smoothstep(float(counts.max() / counts.sum()), *FLAT_SHARE)

    edge, throat = EDGE * lip, THROAT * lip
    flat = FLAT_MOUTH * edge + (1.0 - FLAT_MOUTH) * throat
    edge = shading * edge + (1.0 - shading) * flat
    throat = shading * throat + (1.0 - shading) * flat
    skin_luma = skin_px @ REC601
    luma = min(float(np.percentile(skin_luma, TEETH_PERCENTILE)), TEETH_MAX)
    grey = float(skin @ REC601)
    teeth = np.clip(luma + TEETH_CHROMA * (skin - grey), 0.0, 1.0)
    as_tuple = lambda c: tuple(float(v) for v in c)  # noqa: E731
    return MouthColours(as_tuple(edge), as_tuple(throat), as_tuple(TONGUE * lip), as_tuple(teeth), shading)


def crop_around(image: np.ndarray, polygon: np.ndarray, polygons) -> tuple[np.ndarray, list[np.ndarray]]:
    """The part of `image` around `polygon` (its bounding box, within the picture) and
    `polygons` in that part's pixels: a mask of a 4096² picture costs 16 MB, its mouth
    a few kB."""
    h, w = image.shape[:2]
    x0, y0 = np.clip(np.floor(polygon.min(axis=0)).astype(int), 0, (w, h))
    x1, y1 = np.clip(np.ceil(polygon.max(axis=0)).astype(int) + 1, 0, (w, h))
    origin = np.array([x0, y0], dtype=np.float64)
    return image[y0:y1, x0:x1], [p - origin for p in polygons]


def polygon_mask(size: tuple[int, int], polygon: np.ndarray) -> np.ndarray:
    """Pixels (H×W bool) inside a polygon of pixel coordinates (x right, y down)."""
    canvas = Image.new("1", size, 0)
    ImageDraw.Draw(canvas).polygon([(float(x), float(y)) for x, y in polygon], fill=1)
    return np.asarray(canvas, dtype=bool)
