"""Photo rigs: one portrait plus its face landmarks becomes a talking, blinking avatar.

At import, MediaPipe finds 478 landmarks once. From them this module builds two small
warp meshes in image pixels, each made of rings around a feature:

* the mouth/jaw mesh: the inner and outer lip contours and rings reaching out to a
  still border around the mouth and chin, plus a strip of "cavity" quads between the
  upper and lower inner lip that the renderer fills with the mouth interior. The
  mouth frame is the rectangle around that border;
* one ring mesh per eye, with a strip inside the eye opening that collapses as the
  upper lid comes down.

Every vertex carries a 9-float record (position, two source texture positions, two
depths into the mouth opening, teeth visibility), and every one of those floats is an
affine function of the pose: rest + Σ coefficient × basis. The basis holds, per OVR viseme, a lip-shape
displacement (closure, spreading, rounding, protrusion, lip tuck) and a jaw
displacement per unit of jaw openness, all scaled to this face, and one blink
displacement. `vertices_at` is therefore one small matrix product into a
preallocated array.

The mouth opening's colours (throat, tongue, drawn teeth) come from the portrait's lips
and skin (render/rigs/mouth_colours.py).

Head pose and expressions are a third warp, of the whole face, over the finished frame
(render/rigs/photo_face.py), built from the same landmarks.

A rig saves as a folder (render/rigs/photo_manifest.py: manifest.json, the picture as
PNG); loading rebuilds the meshes here with numpy alone (a few milliseconds), without
MediaPipe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.core.avatar_state import EXPRESSIONS
from pipeline.core.easing import smoothstep
from pipeline.core.frames import MouthPose
from pipeline.core.visemes import OVR_VISEMES
from pipeline.face.landmarks import (
    LANDMARK_COUNT,
    FaceLandmarker,
    PortraitError,
    find_face,
    load_portrait,
)
from render.rigs.mouth_colours import REC601, MouthColours, crop_around, mouth_colours, polygon_mask
from render.rigs.photo_face import FaceWarp, build_face_warp

# Lip contours, MediaPipe indices: left corner, upper lip left to right, right corner,
# lower lip right to left. The two lists correspond point for point.
LIP_OUTER = (61, 185, 40, 39, 37, 0, 267, 269, 270, 409, 291, 375, 321, 405, 314, 17, 84, 181, 91, 146)
LIP_INNER = (78, 191, 80, 81, 82, 13, 312, 311, 310, 415, 308, 324, 318, 402, 317, 14, 87, 178, 88, 95)
# Eye contours the same way round: corner, upper lid, other corner, lower lid.
EYE_RIGHT = (33, 246, 161, 160, 159, 158, 157, 173, 133, 155, 154, 153, 145, 144, 163, 7)
EYE_LEFT = (263, 466, 388, 387, 386, 385, 384, 398, 362, 382, 381, 380, 374, 373, 390, 249)
CHIN = 152
SUBNASALE = 2

RECORD = 9          # x, y, u_up, v_up, u_lo, v_lo, depth_up, depth_lo (canvas pixels), teeth shown
STATIC = 2          # cavity only: half the lips' rest gap (px), |x| / half mouth width
N_VISEMES = len(OVR_VISEMES)
BLINK_ROW = 2 * N_VISEMES

LIP_K = 2 * len(LIP_OUTER)                   # contour points after inserting midpoints
MOUTH_RING_F = (0.18, 0.38, 0.6, 0.82, 1.0)  # rings between the outer lip (0) and border (1)
EYE_RING_F = (0.4, 0.75, 1.0)
# Border of the warped region around the mouth centre, in mouth widths (sideways) and
# in distances to the subnasale (up) and the chin (down).
MOUTH_BORDER = (1.05, 1.0, 2.2)
EYE_BORDER = (0.75, 0.65, 0.5)               # eye widths: sideways, up, down
SUPERELLIPSE = 2.6                           # >2: the border fills more of its rectangle
# Still picture around the border inside the mouth frame, as a fraction of the border's
# size (at least FRAME_FEATHER_MIN px): the composite fades the frame in over it, so
# resampling a frame shown smaller than it is leaves no visible edge.
FRAME_FEATHER = 0.06
FRAME_FEATHER_MIN = 3

# Full jaw opening (openness 1), in mouth widths: lower lip drop at the centre, chin
# drop, and how much the upper lip lifts with it (fraction of the lower lip's drop).
JAW_LIP = 0.38
JAW_CHIN = 0.34
JAW_UPPER_LIFT = 0.12
# Upper teeth showing below the upper lip when the mouth opens, in mouth widths.
TEETH = 0.12
# MediaPipe reads a drawn mouth's closed lips as parted (by 0.15-0.22 of the mouth's
# width on a flat cartoon drawn with PIL at 256 and 512 px); what it reads as the
# opening then shows only lips. Share of the opening's pixels within LIP_LUMA of the
# lips' median luma, measured: 0.80-0.86 on those cartoons, 0.21-0.28 on the astronaut's
# smile (teeth), grey or cropped, and on it rendered open (a dark mouth). From CLOSED_SHARE
# up the lips meet at rest.
CLOSED_SHARE = 0.5
LIP_LUMA = 0.1


@dataclass(frozen=True)
class Shape:
    """A viseme's mouth, relative to the closed relaxed mouth, in mouth widths unless
    said otherwise. `jaw` picks the jaw basis: "flat" opens the lips along their whole
    width, "round" opens a round hole (corners stay together), None keeps them shut."""

    width: float = 0.0          # corners outward (+, spread) or inward (-, rounding)
    raise_upper: float = 0.0    # upper lip lifted (shows the upper teeth)
    lower_down: float = 0.0     # lower lip lowered beyond the jaw
    protrude: float = 0.0       # lips pushed forward: they look fuller, 0..1
    press: float = 0.0          # lips pressed together: they look thinner, 0..1
    tuck_lower: float = 0.0     # lower lip rolled in under the upper teeth, 0..1
    teeth: float = 1.0          # how much of the teeth the lips leave visible, 0..1
    jaw: str | None = "flat"


SHAPES: dict[str, Shape] = {
    "sil": Shape(),
    "PP": Shape(press=1.0, jaw=None),
    "FF": Shape(raise_upper=0.08, tuck_lower=1.0, jaw=None),
    "TH": Shape(raise_upper=0.02),
    "DD": Shape(raise_upper=0.02),
    "kk": Shape(),
    "CH": Shape(width=-0.12, protrude=0.6, raise_upper=0.04, lower_down=0.03, teeth=0.8),
    "SS": Shape(width=0.06, raise_upper=0.03, lower_down=0.02),
    "nn": Shape(),
    "RR": Shape(width=-0.15, protrude=0.5, teeth=0.5, jaw="round"),
    "aa": Shape(width=-0.03, raise_upper=0.03),
    "E": Shape(width=0.14, raise_upper=0.04),
    "ih": Shape(width=0.16, raise_upper=0.03),
    "oh": Shape(width=-0.25, protrude=0.7, teeth=0.45, jaw="round"),
    "ou": Shape(width=-0.35, protrude=1.0, teeth=0.1, jaw="round"),
}


@dataclass
class PhotoRig:
    """An animatable portrait. Coordinates are pixels of `image`, top-left origin.

    `rest` (V×9) and `basis` (31×V×9) define every vertex record; rows 0–14 of the
    basis are the visemes' lip shapes, rows 15–29 their jaw opening per unit openness,
    row 30 the blink. Triangles index those vertices: `mouth_triangles` the mouth/jaw
    skin, `cavity_triangles` the mouth opening, `eye_triangles` both eyes. `static`
    holds per-vertex constants of the cavity. `face` turns the head and makes the
    expressions, over the finished frame. Displacements fade to zero towards
    `border` (the mouth mesh's fixed outline), so the warp is feathered into the still
    picture, which the mouth frame shows beyond it, `frame_feather` pixels out to the
    edges of `mouth_rect`.
    """

    name: str
    image: np.ndarray                      # H×W×4 uint8 RGBA, straight alpha
    landmarks: np.ndarray                  # 478×3 float32, pixels
    articulation: float
    canvas_size: tuple[int, int]           # (width, height) of image
    mouth_rect: tuple[int, int, int, int]  # x0, y0, x1, y1: the mouth frame, whole pixels
    frame_feather: int                     # pixels between the border and the rectangle's edges
    mouth_width: float                     # pixels, corner to corner
    teeth_height: float                    # pixels of upper teeth below the lip in an open mouth
    face_down: tuple[float, float]         # unit vector from the nose towards the chin
    rest: np.ndarray
    basis: np.ndarray
    static: np.ndarray
    mouth_triangles: np.ndarray            # T×3 uint32
    cavity_triangles: np.ndarray           # T×3 uint32
    eye_triangles: np.ndarray              # T×3 uint32
    border: np.ndarray                     # LIP_K×2 float32, outline of the mouth mesh
    inner_lip: np.ndarray                  # LIP_K×2 float32, rest inner lip contour
    face: FaceWarp                         # head pose and expressions (photo_face.py)
    colours: MouthColours                  # the mouth opening's, from the portrait (mouth_colours.py)
    source: Path | None = None
    _coeffs: np.ndarray = field(init=False, repr=False)
    _flat: np.ndarray = field(init=False, repr=False)
    _out: np.ndarray = field(init=False, repr=False)
    _rest_flat: np.ndarray = field(init=False, repr=False)
    _basis_flat: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = self.rest.shape[0]
        self._coeffs = np.zeros(self.basis.shape[0], dtype=np.float32)
        self._flat = np.empty(n * RECORD, dtype=np.float32)
        self._out = self._flat.reshape(n, RECORD)
        self._rest_flat = self.rest.reshape(-1)
        self._basis_flat = self.basis.reshape(self.basis.shape[0], -1)

    @property
    def vertex_count(self) -> int:
        return self.rest.shape[0]

    @property
    def expressions(self) -> tuple[str, ...]:
        """The expressions this rig draws: every one of AvatarState's, by its face warp."""
        return EXPRESSIONS

    def pose_terms(self, pose: MouthPose, blink: float) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """The basis rows a mouth pose and eyelid closure use, and their weights: the
        vertex records are rest + Σ weight × basis[row] (a row may come twice). The
        CUDA mouth frame sums the same terms on the device."""
        w_b = min(max(pose.mix, 0.0), 1.0)
        w_a = 1.0 - w_b
        openness = min(max(pose.openness, 0.0), 1.0)
        return ((pose.viseme_a, pose.viseme_b, N_VISEMES + pose.viseme_a, N_VISEMES + pose.viseme_b, BLINK_ROW),
                (w_a, w_b, w_a * openness, w_b * openness, min(max(blink, 0.0), 1.0)))

    def vertices_at(self, pose: MouthPose, blink: float) -> np.ndarray:
        """Vertex records (V×9 float32) for a mouth pose and eyelid closure (0 open,
        1 shut). The array is reused: the next call overwrites it."""
        c = self._coeffs
        c.fill(0.0)
        for row, weight in zip(*self.pose_terms(pose, blink)):
            c[row] += weight
        np.dot(c, self._basis_flat, out=self._flat)
        self._flat += self._rest_flat
        return self._out


# -- building ------------------------------------------------------------------------


def import_portrait(path: str | Path, face_index: int | None = None, *,
                    landmarker: FaceLandmarker | None = None, name: str | None = None,
                    articulation: float = 1.0) -> PhotoRig:
    """Make a rig from a PNG/JPEG portrait. PortraitError (SeveralFacesError with the
    faces' boxes when a choice is needed) for pictures that cannot be animated. Pass a
    `landmarker` to reuse one across imports."""
    path = Path(path)
    image = load_portrait(path)
    own = landmarker is None
    landmarker = landmarker or FaceLandmarker()
    try:
        faces = landmarker.detect(image)
    finally:
        if own:
            landmarker.close()
    face = find_face(faces, path.name, face_index)
    return build_photo_rig(image, face.points, name or path.stem, articulation, source=path)


def build_photo_rig(image: np.ndarray, landmarks: np.ndarray, name: str,
                    articulation: float = 1.0, source: Path | None = None) -> PhotoRig:
    """The rig for a picture and its 478 landmarks (pixels). Deterministic: the same
    inputs give bit-identical meshes, which is what makes a saved rig reload exactly."""
    h, w = image.shape[:2]
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 4:
        raise ValueError(f"image must be H×W×4 uint8, not {image.dtype} {image.shape}")
    landmarks = np.asarray(landmarks, dtype=np.float32)
    if landmarks.shape != (LANDMARK_COUNT, 3):
        raise ValueError(f"landmarks must be {LANDMARK_COUNT}×3, not {landmarks.shape}")
    pts = landmarks[:, :2].astype(np.float64)
    if _lips_meet(image, pts):
        upper, lower = list(LIP_INNER[1:10]), list(LIP_INNER[11:20])[::-1]
        pts[upper] = pts[lower] = 0.5 * (pts[upper] + pts[lower])

    mesh = _Mesh()
    mouth = _build_mouth(mesh, pts, (w, h), articulation)
    for contour in (EYE_RIGHT, EYE_LEFT):
        _build_eye(mesh, pts, contour, mouth.ex)
    rest, basis, static = mesh.arrays()
    return PhotoRig(
        name=name, image=image, landmarks=landmarks, articulation=float(articulation),
        canvas_size=(w, h), mouth_rect=mouth.rect, frame_feather=mouth.feather, mouth_width=float(mouth.mw),
        teeth_height=TEETH * mouth.mw, face_down=(float(mouth.ey[0]), float(mouth.ey[1])),
        rest=rest, basis=basis, static=static,
        mouth_triangles=mesh.triangle_array("skin"), cavity_triangles=mesh.triangle_array("cavity"),
        eye_triangles=mesh.triangle_array("eye"), border=mouth.border.astype(np.float32),
        inner_lip=mouth.inner_rest.astype(np.float32), face=build_face_warp(landmarks, (w, h)),
        colours=mouth_colours(image, pts[list(LIP_OUTER)], pts[list(LIP_INNER)]), source=source,
    )


def _lips_meet(image: np.ndarray, pts: np.ndarray) -> bool:
    """Whether the opening between the inner lip landmarks shows the lips themselves
    (CLOSED_SHARE): then the lips are closed at rest, whatever the landmarks say."""
    image, (outer, inner) = crop_around(image, pts[list(LIP_OUTER)], (pts[list(LIP_OUTER)], pts[list(LIP_INNER)]))
    h, w = image.shape[:2]
    opening = polygon_mask((w, h), inner)
    lips = polygon_mask((w, h), outer) & ~opening
    if not opening.any() or not lips.any():
        return False
    luma = image[..., :3].astype(np.float64) @ REC601 / 255.0
    return bool((np.abs(luma[opening] - np.median(luma[lips])) < LIP_LUMA).mean() >= CLOSED_SHARE)


class _Mesh:
    """Vertices (rest record, displacement basis rows, static record) and triangles in
    named groups, appended feature by feature."""

    def __init__(self) -> None:
        self.rest: list[np.ndarray] = []
        self.basis: list[np.ndarray] = []
        self.static: list[np.ndarray] = []
        self.triangles: dict[str, list[tuple[int, int, int]]] = {"skin": [], "cavity": [], "eye": []}

    def add_skin(self, rest_xy: np.ndarray, disp: np.ndarray) -> int:
        """Skin vertices: drawn from the picture where they lay at rest. `disp` is
        (rows, n, 2). Returns the index of the first one."""
        start = len(self.rest)
        n = len(rest_xy)
        record = np.zeros((n, RECORD))
        record[:, 0:2] = record[:, 2:4] = record[:, 4:6] = rest_xy
        rows = np.zeros((BLINK_ROW + 1, n, RECORD))
        rows[:, :, 0:2] = disp
        self._append(record, rows, np.zeros((n, STATIC)))
        return start

    def add_records(self, record: np.ndarray, rows: np.ndarray, static: np.ndarray) -> int:
        start = len(self.rest)
        self._append(record, rows, static)
        return start

    def _append(self, record, rows, static) -> None:
        self.rest.extend(record)
        self.basis.extend(np.moveaxis(rows, 1, 0))
        self.static.extend(static)

    def strip(self, group: str, inner: int, outer: int, n: int) -> None:
        """Quads between two closed rings of n vertices each, point k facing point k."""
        for k in range(n):
            self.quad(group, inner + k, inner + (k + 1) % n, outer + k, outer + (k + 1) % n)

    def quad(self, group: str, a: int, b: int, c: int, d: int) -> None:
        """Two triangles over a-b (one side) and c-d (the side facing it)."""
        self.triangles[group] += [(a, c, b), (b, c, d)]

    def triangle_array(self, group: str) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(self.triangles[group], dtype=np.uint32).reshape(-1, 3))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rest = np.asarray(self.rest, dtype=np.float32)
        basis = np.ascontiguousarray(np.moveaxis(np.asarray(self.basis), 0, 1), dtype=np.float32)
        static = np.asarray(self.static, dtype=np.float32)
        return rest, basis, static


@dataclass
class _Mouth:
    ex: np.ndarray
    ey: np.ndarray
    mw: float
    rect: tuple[int, int, int, int]
    feather: int
    border: np.ndarray
    inner_rest: np.ndarray


def _upsample(contour: np.ndarray) -> np.ndarray:
    """Insert the midpoint of every segment of a closed contour."""
    out = np.empty((2 * len(contour), 2))
    out[0::2] = contour
    out[1::2] = 0.5 * (contour + np.roll(contour, -1, axis=0))
    return out


def _superellipse(phi: np.ndarray, right: float, left: float, up: float, down: float) -> np.ndarray:
    """Points (local x right, y down) on an asymmetric superellipse at parameters phi."""
    cos, sin = np.cos(phi), np.sin(phi)
    e = 2.0 / SUPERELLIPSE
    x = np.sign(cos) * np.abs(cos) ** e * np.where(cos >= 0, right, left)
    y = np.sign(sin) * np.abs(sin) ** e * np.where(sin >= 0, down, up)
    return np.stack([x, y], axis=1)


def _contour_angles(s: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Superellipse parameters for contour points from their position across the feature
    (s = -1 at the first corner, +1 at the other): the upper side runs over the top,
    the lower side back under the bottom. Rings further out keep the contour's spacing."""
    across = np.arccos(np.clip(s, -1.0, 1.0))
    return np.where(upper, 2.0 * np.pi - across, across)


def _fit_inside(start: np.ndarray, end: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Pull each end point back along start→end so that it stays one pixel inside the
    picture; the start points must be inside already."""
    w, h = size
    lo, hi = np.array([1.0, 1.0]), np.array([w - 1.0, h - 1.0])
    d = end - start
    t = np.ones(len(end))
    for axis in (0, 1):
        with np.errstate(divide="ignore", invalid="ignore"):
            t_hi = np.where(d[:, axis] > 0, (hi[axis] - start[:, axis]) / d[:, axis], np.inf)
            t_lo = np.where(d[:, axis] < 0, (lo[axis] - start[:, axis]) / d[:, axis], np.inf)
        t = np.minimum(t, np.minimum(t_hi, t_lo))
    return start + d * np.clip(t, 0.0, 1.0)[:, None]


def _build_mouth(mesh: _Mesh, pts: np.ndarray, size: tuple[int, int], articulation: float) -> _Mouth:
    w, h = size
    left, right = pts[LIP_OUTER[0]], pts[LIP_OUTER[10]]
    mw = float(np.linalg.norm(right - left))
    if mw < 4.0:
        raise PortraitError("The mouth is too small or the landmarks are broken (corners coincide).")
    ex = (right - left) / mw
    ey = np.array([-ex[1], ex[0]])                   # image y is down: ey points chin-wards
    axes = np.stack([ex, ey])
    outer = _upsample(pts[list(LIP_OUTER)])
    inner = _upsample(pts[list(LIP_INNER)])
    corner_mid = 0.5 * (left + right)
    # Centre between the lips' outer edges, not on the corners: a smile lifts the
    # corners well above the middle of the mouth.
    lip_mid = 0.5 * (pts[LIP_OUTER[5]] + pts[LIP_OUTER[15]])
    center = corner_mid + ey * float((lip_mid - corner_mid) @ ey)
    to_local = lambda p: (p - center) @ axes.T          # noqa: E731
    to_global = lambda q: center + q @ axes             # noqa: E731
    if np.any(outer < 1) or np.any(outer[:, 0] > w - 1) or np.any(outer[:, 1] > h - 1):
        raise PortraitError("The mouth touches the edge of the picture; use a picture with "
                            "some room around the face.")

    outer_l, inner_l = to_local(outer), to_local(inner)
    half = mw / 2.0
    up = max(float(-to_local(pts[SUBNASALE])[1]) * MOUTH_BORDER[1], 0.45 * mw, -outer_l[:, 1].min() * 1.6)
    down = max(float(to_local(pts[CHIN])[1]) * MOUTH_BORDER[2], outer_l[:, 1].max() * 2.5)
    side = MOUTH_BORDER[0] * mw
    k = np.arange(LIP_K)
    upper = (k > 0) & (k < LIP_K // 2)
    lower = k > LIP_K // 2
    corner = ~(upper | lower)
    column = np.where(lower, LIP_K - k, k)          # the upper point facing each point
    s_out = np.clip(outer_l[:, 0] / half, -1, 1)
    s_in = np.clip(inner_l[:, 0] / half, -1, 1)
    phi = _contour_angles(s_out, upper)
    border = to_global(_superellipse(phi, side, side, up, down))
    border = _fit_inside(outer, border, size)
    border_l = to_local(border)
    # Rest gap between the inner lips, per column (0 at the corners, never negative).
    gap = np.maximum((inner_l[(LIP_K - k) % LIP_K, 1] - inner_l[k, 1]), 0.0)
    gap = np.where(upper, gap, gap[column])
    gap[corner] = 0.0
    thick_up = np.maximum(inner_l[:, 1] - outer_l[:, 1], 0.0)
    thick_lo = np.maximum(outer_l[:, 1] - inner_l[:, 1], 0.0)
    corner_y = 0.5 * (outer_l[0, 1] + outer_l[LIP_K // 2, 1])

    # Displacements of the two lip rings, local frame: [row, ring (0 inner, 1 outer), k, xy].
    lips = np.zeros((BLINK_ROW + 1, 2, LIP_K, 2))
    for v, name in enumerate(OVR_VISEMES):
        shape = SHAPES[name]
        lips[v] = _lip_shape(shape, articulation, mw, inner_l, outer_l, s_in, s_out, gap,
                             thick_up, thick_lo, upper, lower, corner_y)
        if shape.jaw is not None:
            lips[N_VISEMES + v] = _lip_jaw(shape.jaw, articulation, mw, s_in, s_out, upper, lower)

    # Rings from the outer lip to the border: lip shapes fade out close to the mouth,
    # the jaw carries the chin down rigidly and fades over the neck.
    rings_l = [inner_l, outer_l] + [outer_l + f * (border_l - outer_l) for f in MOUTH_RING_F]
    ring_f = [0.0, 0.0] + list(MOUTH_RING_F)
    sin_phi = np.sin(phi)
    lowerness = smoothstep(sin_phi, -0.25, 0.25)
    jaw_weight = lowerness * (0.35 + 0.65 * np.abs(sin_phi))
    jaw_up = -JAW_UPPER_LIFT * (1.0 - lowerness) * np.abs(sin_phi)
    starts = []
    for r, (ring, f) in enumerate(zip(rings_l, ring_f)):
        disp = np.zeros((BLINK_ROW + 1, LIP_K, 2))
        if r < 2:
            disp[:] = lips[:, r]
        else:
            fade_y = 1.0 - smoothstep(f, 0.0, 0.6)
            fade_x = 1.0 - smoothstep(f, 0.0, 0.75)
            disp[:N_VISEMES, :, 0] = lips[:N_VISEMES, 1, :, 0] * fade_x
            disp[:N_VISEMES, :, 1] = lips[:N_VISEMES, 1, :, 1] * fade_y
            # Gone before the last ring: only the skin just above the border ring
            # moves, by less than a pixel, and nothing at all at the border.
            jaw_fade = 1.0 - smoothstep(f, 0.35, 0.85)
            jaw = JAW_CHIN * mw * articulation * (jaw_weight + jaw_up) * jaw_fade
            for v, name in enumerate(OVR_VISEMES):
                if SHAPES[name].jaw is not None:
                    disp[N_VISEMES + v, :, 1] = jaw
        starts.append(mesh.add_skin(to_global(ring), disp @ axes))
    for a, b in zip(starts, starts[1:]):
        mesh.strip("skin", a, b, LIP_K)

    extent = float(np.ptp(border, axis=0).max())
    margin = max(FRAME_FEATHER_MIN, math.ceil(FRAME_FEATHER * extent))
    rect = _mouth_rect(border, size, margin + 1)
    _add_cavity(mesh, starts[0], inner, gap, s_in, ey)
    return _Mouth(ex=ex, ey=ey, mw=mw, rect=rect, feather=margin, border=border, inner_rest=inner)


def _lip_shape(shape: Shape, art: float, mw: float, inner_l, outer_l, s_in, s_out, gap,
               thick_up, thick_lo, upper, lower, corner_y: float) -> np.ndarray:
    """Lip ring displacements (2, K, 2) for a viseme's shape at openness 0."""
    out = np.zeros((2, LIP_K, 2))
    sign = np.where(upper, 1.0, np.where(lower, -1.0, 0.0))
    for ring, (local, s) in enumerate(((inner_l, s_in), (outer_l, s_out))):
        d = out[ring]
        # Closure: both lips meet half-way across the rest gap, moving as a whole.
        d[:, 1] += sign * 0.5 * gap
        prof = 1.0 - s * s
        d[:, 0] += art * shape.width * local[:, 0]
        lift = art * shape.raise_upper * mw * prof * (1.0 if ring == 0 else 0.6)
        d[:, 1] -= np.where(upper, lift, 0.0)
        drop = art * shape.lower_down * mw * prof * (1.0 if ring == 0 else 0.8)
        d[:, 1] += np.where(lower, drop, 0.0)
        # Pushed-forward lips lose a smile: corners come back level with the centre.
        d[:, 1] -= min(art * shape.protrude, 1.0) * corner_y * s * s
        if ring == 1:
            pout = art * shape.protrude * mw * (1.0 - s ** 4)
            d[:, 1] += np.where(upper, -0.10 * pout, np.where(lower, 0.12 * pout, 0.0))
            press = art * shape.press
            d[:, 1] += np.where(upper, 0.15 * press * thick_up, np.where(lower, -0.15 * press * thick_lo, 0.0))
            tuck = art * shape.tuck_lower
            d[:, 1] += np.where(lower, -0.35 * tuck * thick_lo, 0.0)
    return out


def _lip_jaw(kind: str, art: float, mw: float, s_in, s_out, upper, lower) -> np.ndarray:
    """Lip ring displacements (2, K, 2) per unit of jaw openness."""
    out = np.zeros((2, LIP_K, 2))
    for ring, s in enumerate((s_in, s_out)):
        if kind == "round":
            aperture = np.sqrt(np.clip(1.0 - s * s, 0.0, 1.0))
        else:
            aperture = 1.0 - 0.55 * np.abs(s) ** 3
        drop = art * JAW_LIP * mw * aperture
        out[ring, :, 1] = np.where(lower, drop, np.where(upper, -JAW_UPPER_LIFT * drop, 0.45 * drop))
    return out


def _mouth_rect(border: np.ndarray, size: tuple[int, int], margin: int) -> tuple[int, int, int, int]:
    """The border's bounding box plus a margin, on a 4-pixel grid: shown at a half or a
    quarter of its size, the mouth frame's texels then coincide with the picture's
    mipmap texels."""
    w, h = size
    x0, y0 = (np.floor(border.min(axis=0)).astype(int) - margin) // 4 * 4
    x1, y1 = -((-np.ceil(border.max(axis=0)).astype(int) - margin) // 4 * 4)
    return (max(int(x0), 0), max(int(y0), 0), min(int(x1), w), min(int(y1), h))


def _add_cavity(mesh: _Mesh, inner_start: int, inner: np.ndarray, gap: np.ndarray,
                s_in: np.ndarray, ey: np.ndarray) -> None:
    """Quads between facing upper and lower inner-lip points. Each record keeps, besides
    its position, where the upper and lower teeth seen at rest come from (they move with
    their lip) and how deep the point lies below the upper and above the lower lip."""
    half = LIP_K // 2
    cols = np.arange(half + 1)
    top, bottom = cols, (LIP_K - cols) % LIP_K
    ring_rows = np.asarray(mesh.basis[inner_start:inner_start + LIP_K])  # (K, rows, 8)
    d_top, d_bot = ring_rows[top, :, 0:2], ring_rows[bottom, :, 0:2]    # (cols, rows, 2)
    rel = d_bot - d_top
    rel_depth = rel @ ey
    p_top, p_bot = inner[top], inner[bottom]
    rest_depth = np.maximum((p_bot - p_top) @ ey, 0.0)
    n = len(cols)
    record = np.zeros((2 * n, RECORD))
    rows = np.zeros((2 * n, BLINK_ROW + 1, RECORD))
    # Top row: at the upper lip.
    record[:n, 0:2] = p_top
    record[:n, 2:4] = p_top
    record[:n, 4:6] = p_top
    record[:n, 7] = rest_depth
    rows[:n, :, 0:2] = d_top
    rows[:n, :, 4:6] = -rel
    rows[:n, :, 7] = rel_depth
    # Bottom row: at the lower lip.
    record[n:, 0:2] = p_bot
    record[n:, 2:4] = p_bot
    record[n:, 4:6] = p_bot
    record[n:, 6] = rest_depth
    rows[n:, :, 0:2] = d_bot
    rows[n:, :, 2:4] = rel
    rows[n:, :, 6] = rel_depth
    rows[:, :N_VISEMES, 8] = [SHAPES[name].teeth for name in OVR_VISEMES]
    static = np.zeros((2 * n, STATIC))
    static[:, 0] = np.tile(0.5 * gap[top], 2)
    static[:, 1] = np.tile(np.abs(s_in[top]), 2)
    start = mesh.add_records(record, np.moveaxis(rows, 1, 0), static)
    for j in range(half):
        mesh.quad("cavity", start + j, start + j + 1, start + n + j, start + n + j + 1)


def _build_eye(mesh: _Mesh, pts: np.ndarray, indices: tuple[int, ...], ex: np.ndarray) -> None:
    """`ex` is the face's left-to-right axis (along the mouth)."""
    contour = pts[list(indices)]
    n = len(contour)
    first, other = contour[0], contour[n // 2]
    # x runs from the contour's first corner to its other one (mirrored for the left
    # eye), y down the face for both eyes.
    ey = np.array([-ex[1], ex[0]])
    ex = ex if float((other - first) @ ex) > 0 else -ex
    axes = np.stack([ex, ey])
    mid = 0.5 * (first + other)
    center = mid + ey * float((contour.mean(axis=0) - mid) @ ey)
    local = (contour - center) @ axes.T
    ew = float(local[n // 2, 0] - local[0, 0])
    if ew < 2.0:
        raise PortraitError("The eye landmarks are broken (an eye's corners coincide).")
    k = np.arange(n)
    upper = (k > 0) & (k < n // 2)
    lower = k > n // 2
    phi = _contour_angles(2.0 * (local[:, 0] - local[0, 0]) / ew - 1.0, upper)
    border = _superellipse(phi, EYE_BORDER[0] * ew, EYE_BORDER[0] * ew,
                           EYE_BORDER[1] * ew, EYE_BORDER[2] * ew)
    facing = (n - k) % n
    # The lid comes down most of the way; the lower lid rises to meet it.
    gap = np.maximum(np.where(lower, local[:, 1] - local[facing, 1], local[facing, 1] - local[:, 1]), 0.0)
    lid = np.where(upper, 0.8 * gap, np.where(lower, -0.2 * gap, 0.0))
    starts = []
    for f in (0.0,) + EYE_RING_F:
        ring = local + f * (border - local)
        fade = np.where(upper, 1.0 - smoothstep(f, 0.0, 1.0) ** 0.7,
                        1.0 - smoothstep(f, 0.0, 0.6))
        disp = np.zeros((BLINK_ROW + 1, n, 2))
        disp[BLINK_ROW, :, 1] = lid * fade
        starts.append(mesh.add_skin(center + ring @ axes, disp @ axes))
    for a, b in zip(starts, starts[1:]):
        mesh.strip("eye", a, b, n)
    # Inside the eye opening: columns between facing lid points, squeezed shut by a blink.
    s = starts[0]
    for j in range(n // 2):
        mesh.quad("eye", s + j, s + j + 1, s + (n - j) % n, s + (n - j - 1) % n)
