"""A photo rig built with numpy alone, for machines without MediaPipe or skimage (the GPU
test machine): the astronaut portrait's 478 face landmarks, as MediaPipe found them
(face_landmarks.json, made once with the bundled landmarker from
skimage.data.astronaut()), over a picture drawn here — skin with a fine pattern (so
resampling differences show), lips, teeth showing between them, eyes. With
`closed_lips` the inner lips meet, so the rig draws its own teeth. `size` scales the
portrait (and its landmarks) from the astronaut's 512 pixels. `flat` draws a cartoon:
one colour per feature, no pattern, no gradient."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pipeline.core.frames import MouthPose
from pipeline.core.visemes import OVR_VISEMES
from render.gl.photo_renderer import mouth_frame_transform
from render.rigs.photo import EYE_LEFT, EYE_RIGHT, LIP_INNER, LIP_OUTER, PhotoRig, build_photo_rig

SIZE = 512
# Every viseme shut, half and fully open, and mixed into the one 4 along at a third:
# the lips, the jaw, the opening with tongue and teeth.
COMPARED_POSES = [MouthPose(a, b, mix, openness) for a in range(len(OVR_VISEMES))
                  for b, mix, openness in ((a, 0.0, 0.0), (a, 0.0, 0.5), (a, 0.0, 1.0),
                                           ((a + 4) % len(OVR_VISEMES), 0.33, 0.8))]


def _inside(points: np.ndarray, size: int) -> np.ndarray:
    """Pixels whose centres lie inside the polygon `points` (even-odd rule)."""
    inside = np.zeros((size, size), bool)
    (x0, y0), (x1, y1) = np.floor(points.min(axis=0)).astype(int), np.ceil(points.max(axis=0)).astype(int) + 1
    y, x = np.mgrid[y0:y1, x0:x1] + 0.5
    box = inside[y0:y1, x0:x1]
    for (ax, ay), (bx, by) in zip(points, np.roll(points, -1, axis=0)):
        if ay != by:
            box ^= ((ay > y) != (by > y)) & (x < ax + (y - ay) * (bx - ax) / (by - ay))
    return inside


def landmarks(closed_lips: bool = False, size: int = SIZE) -> np.ndarray:
    points = np.array(json.loads((Path(__file__).with_name("face_landmarks.json")).read_text())["landmarks"],
                      np.float32) * (size / SIZE)
    if closed_lips:
        upper, lower = list(LIP_INNER[1:10]), list(LIP_INNER[11:20])[::-1]
        middle = (points[upper] + points[lower]) / 2
        points[upper] = points[lower] = middle
    return points


FLAT_SKIN = (240, 190, 150)


def drawn_portrait(closed_lips: bool = False, size: int = SIZE, flat: bool = False) -> PhotoRig:
    points = landmarks(closed_lips, size)
    y, x = np.mgrid[0:size, 0:size] / size
    if flat:
        rgb = np.broadcast_to(np.array(FLAT_SKIN, float), (size, size, 3)).copy()
    else:
        rgb = np.stack([200 + 30 * x, 150 + 40 * y, 120 + 20 * x * y], axis=2)
        # A pattern at a few pixels' period: a mis-sampled picture shows in it.
        rgb += 18 * np.sin(2 * np.pi * (x * size / 5.3))[..., None] * np.cos(2 * np.pi * (y * size / 4.1))[..., None]
    xy = points[:, :2]
    rgb[_inside(xy[list(LIP_OUTER)], size)] = (170, 60, 70)
    rgb[_inside(xy[list(LIP_INNER)], size)] = (235, 232, 220)
    for eye in (EYE_RIGHT, EYE_LEFT):
        rgb[_inside(xy[list(eye)], size)] = (60, 40, 30)
    image = np.concatenate([np.clip(rgb, 0, 255), np.full((size, size, 1), 255.0)], axis=2)
    return build_photo_rig(image.round().astype(np.uint8), points, "drawn portrait")


# GL snaps vertices to 1/256 pixel (GL_SUBPIXEL_BITS 8 on llvmpipe and NVIDIA); two
# rasterisers may round an end of an edge a step apart, so either may own a pixel
# centre this close to it.
TIE_DISTANCE = 2 / 256

# Shown smaller, a mouth frame samples the picture's mipmaps (GL's own levels, read back).
# llvmpipe picks a 2×2 quad's level from its own approximation of the scale factor; the
# kernel's CPU build from the GL spec's, per pixel. Near a switch of levels the two take
# neighbouring levels, and on this fine-patterned picture those differ by tens of levels.
# Measured on llvmpipe: 55 of 266,000 pixels over 2/255 (portrait 512 shown at 320),
# 54 of 600,000 (1024 at 512); shifting the CPU's level choice by ±0.15 explains all
# but 10 and 7 of them, and any shift of 0.15 makes 40-130 times more, so the level
# choice is GL's save at the switches. The bound: a thousandth of the pixels.
MIPMAP_SHARE_OVER_BOUND = 1e-3


def near_opening_edges(rig: PhotoRig, pose: MouthPose, size: tuple[int, int]) -> np.ndarray:
    """The mouth frame's pixels (H×W, row 0 the rectangle's top) whose centres lie within
    TIE_DISTANCE of an edge of the mouth opening at `pose`: there the opening meets the
    lips, and which of the two a rasteriser draws is its own rounding's call."""
    (sx, sy), (ox, oy) = mouth_frame_transform(rig.mouth_rect)
    v = rig.vertices_at(pose, 0.0)
    w, h = size
    x = (v[:, 0] * sx + ox + 1.0) * 0.5 * w
    y = (v[:, 1] * sy + oy + 1.0) * 0.5 * h
    cy, cx = np.mgrid[0:h, 0:w] + 0.5
    near = np.zeros((h, w), bool)
    for triangle in rig.cavity_triangles:
        for a, b in ((0, 1), (1, 2), (2, 0)):
            (ax, ay), (bx, by) = (x[triangle[a]], y[triangle[a]]), (x[triangle[b]], y[triangle[b]])
            dx, dy = bx - ax, by - ay
            t = np.clip(((cx - ax) * dx + (cy - ay) * dy) / max(dx * dx + dy * dy, 1e-12), 0.0, 1.0)
            near |= np.hypot(cx - ax - t * dx, cy - ay - t * dy) < TIE_DISTANCE
    return near


def compare_mouth_frames(rig: PhotoRig, poses, frames_a, frames_b, size: tuple[int, int],
                         bound: int) -> tuple[int, int]:
    """(largest difference away from the opening's edges, pixels over `bound` on them)
    between two producers' mouth frames of `poses` (int arrays, H×W×4)."""
    worst, ties = 0, 0
    for pose, a, b in zip(poses, frames_a, frames_b):
        diff = np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=2)
        near = near_opening_edges(rig, pose, size)
        worst = max(worst, int(diff[~near].max()))
        ties += int((diff[near] > bound).sum())
    return worst, ties
