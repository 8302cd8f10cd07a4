"""A photo rig's head pose and expressions: one warp of the whole face.

The mouth frame and the eyes are drawn first, as they always were; this warp then moves
the finished picture of the face (PhotoRenderer copies that part of the frame and draws
it back through the warp), so everything already on the face, an open mouth or a blink,
turns and smiles with it, and whoever made the mouth frame (GL or CUDA) needs nothing
more.

The warp is a regular grid over the face and a band around it. Every vertex moves by
rest + Σ coefficient × basis row, like the mouth mesh:

* head pose, weighted by `w_head`: 1 over the whole face oval, falling smoothly to 0 at
  HEAD_BORDER times its size, so hair, neck and background beyond are anchored and the
  band between takes the stretch. Yaw and pitch are a parallax: each point turns about
  the neck's axis by its depth, which MediaPipe's landmarks carry (z, pixels, smaller is
  nearer), so the nose moves most and the face's outline, at the depth of the pivot,
  hardly at all. Roll rotates the face rigidly about the neck, below the chin. The
  offsets move the face as a whole. A rotation is exact in sin θ and cos θ − 1, so
  each angle has two rows. Signs as seen, as AvatarState's: positive yaw turns the face
  to the picture's left (the nose moves left), positive pitch looks up, positive roll
  tilts counter-clockwise; offset_x is a share of the picture's width to the right,
  offset_y of its height upwards.
* expressions, weighted by `w_expr`: 1 inside the face oval, 0 from EXPRESSION_FADE[1]
  times its size: nothing outside the face moves. Each is a few handles (a point or a
  polyline of landmarks) that drag the skin around them with a Gaussian fall-off.

Invariants: every coefficient 0 gives every vertex its rest position (the renderer then
skips the pass: the frame is today's exactly); the grid's outermost vertices never move;
no expression row at full weight stretches or squashes any cell by more than
MAX_EXPRESSION_STRAIN (a row is scaled down at build time where it would), and no head
motion alone, either way, by more than MAX_STRAIN (the limits found at build time; a
frame's motions together are scaled down so their shares of them sum to at most 1), so
the warp never folds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pipeline.core.avatar_state import EXPRESSIONS, INDEX, AvatarState
from pipeline.core.easing import smoothstep
from pipeline.core.frames import MouthPose

# MediaPipe's face oval, clockwise from the top of the forehead.
FACE_OVAL = (10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378,
             400, 377, 152, 148, 176, 149, 150, 136, 172, 58, 132, 93, 234, 127, 162, 21, 54, 103, 67, 109)
# Eyebrows outer end to inner end, upper and lower edge ("left": the person's, on the
# picture's right, as MediaPipe and AvatarState's brow_left name it).
BROW_LEFT = ((300, 293, 334, 296, 336), (276, 283, 282, 295, 285))
BROW_RIGHT = ((70, 63, 105, 66, 107), (46, 53, 52, 65, 55))
UPPER_LID_LEFT = (466, 388, 387, 386, 385, 384, 398)
UPPER_LID_RIGHT = (246, 161, 160, 159, 158, 157, 173)
LOWER_LID_LEFT = (381, 380, 374, 373, 390)
LOWER_LID_RIGHT = (154, 153, 145, 144, 163)
MOUTH_CORNERS = (61, 291)             # the person's right, left
CHEEKS = (50, 280)                    # below each eye, the apple of the cheek
EYE_CORNERS = ((33, 133), (263, 362))
# The face's sides at the ears: the yaw and pitch pivot's depth and height (the neck's
# joint with the skull turns the head about an axis near the ears' depth).
FACE_SIDES = (234, 454)
CHIN = 152

# Head rows, then expression rows.
YAW_SIN, YAW_COS, PITCH_SIN, PITCH_COS, ROLL_SIN, ROLL_COS, SHIFT_X, SHIFT_Y = range(8)
(BROW_UP_LEFT, BROW_UP_RIGHT, BROW_DOWN_LEFT, BROW_DOWN_RIGHT, BROW_INNER_UP, SMILE, FROWN,
 EYES_WIDE) = range(8, 16)
ROWS = 16
HEAD_ROWS = slice(0, 8)

# Grid cells along the face region's longer side: ~3 px cells for the astronaut's
# 90-px face, and the same count for any face size (the cost is per pixel, not vertex).
GRID = 48
# Head motion fades out between the face oval (1) and this many times its size: hair,
# neck and background beyond stay where they are.
HEAD_BORDER = 2.3
# Expressions fade out between these (face oval sizes): the outer brow ends lie at ~0.9.
EXPRESSION_FADE = (0.88, 1.05)
# Cells squashed or stretched by more than this look drawn rather than photographed
# (a judgement, not a measurement: at 25 % the cheek of a yawing astronaut is visibly
# flattened but still reads as a face to MediaPipe, tests/test_photo_face.py).
MAX_STRAIN = 0.25
# Expressions stretch skin as faces do: raised brows lengthen the skin between brow and
# lid by about half (the brow rises by some 30-50 % of its height above the lid). Below
# 1 no cell folds.
MAX_EXPRESSION_STRAIN = 0.5
# The small-angle parallax has no occlusion: past these the far cheek should hide.
MAX_YAW = MAX_PITCH = math.radians(20.0)
MAX_ROLL = math.radians(15.0)
# The roll pivot lies below the chin by this share of the chin's distance to the eyes.
NECK_BELOW_CHIN = 0.35

# Expression handles, in eye widths (brows, lids) or mouth widths (mouth, cheeks). The
# displacement is at the handle; it falls off as a Gaussian of the given radius.
BROW_RAISE = 0.28
BROW_REACH_UP = 0.7        # the forehead goes up with the brow
BROW_REACH_DOWN = 0.55     # share of the brow's distance to the upper lid
BROW_LOWER = 0.16          # angry: down...
BROW_INWARD = 0.12         # ...and towards the nose, most at the inner end
BROW_INNER_RAISE = 0.22    # sad: the inner ends up
SMILE_UP, SMILE_OUT, SMILE_REACH = 0.16, 0.08, 0.3
CHEEK_UP, CHEEK_REACH = 0.08, 0.3
FROWN_DOWN = 0.09
LID_UP, LID_DOWN, LID_REACH = 0.09, 0.04, 0.22
# Expressions that move the mouth or the lids, through the mouth frame and the eye
# meshes: surprise drops the jaw a third of the way, relaxed lowers the lids a quarter.
SURPRISE_JAW = 0.33
RELAXED_LIDS = 0.25
RELAXED_SMILE = 0.4        # relaxed: a slight smile
ANGRY_FROWN = 0.4          # angry: the corners a little down

_EXPRESSION = {name: INDEX[f"expression_{name}"] for name in EXPRESSIONS}


@dataclass
class FaceWarp:
    """The face warp of one rig. `rest` (V×2, canvas pixels) is where each grid vertex
    samples the frame; `basis` (ROWS×V×2) its displacement per unit of each row's
    coefficient; `triangles` (T×3 uint32) the grid, those expressions move first (`drawn[0]`
    of them), then those only the head moves (`drawn[1]` in all), then the still ones. `limits` are the largest |yaw|,
    |pitch|, |roll| (radians) and |offset_x|, |offset_y| (canvas units) drawn, each
    alone within MAX_STRAIN; `rect` (x0, y0, x1, y1, canvas pixels) the grid's extent;
    `oval` the face oval's polygon, `center` the point its size is measured from."""

    rest: np.ndarray
    basis: np.ndarray
    triangles: np.ndarray
    drawn: tuple[int, int]                 # triangles moved by expressions, by anything
    shape: tuple[int, int]                 # grid vertices (rows, columns)
    rect: tuple[float, float, float, float]
    limits: tuple[float, float, float, float, float]
    oval: np.ndarray
    center: tuple[float, float]
    _coeffs: np.ndarray = field(init=False, repr=False)
    _out: np.ndarray = field(init=False, repr=False)
    _basis_flat: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._coeffs = np.zeros(ROWS, np.float32)
        self._out = np.empty_like(self.rest)
        self._basis_flat = self.basis.reshape(ROWS, -1)

    def coefficients(self, state: AvatarState) -> np.ndarray:
        """The rows' coefficients for a state (a reused array). All head motion together
        is scaled down so the sum of each term's share of its limit is at most 1 (the
        strains of small displacements add at most)."""
        v, c = state.values, self._coeffs
        c.fill(0.0)
        yaw, pitch, roll = (float(v[INDEX[k]]) for k in ("yaw", "pitch", "roll"))
        moves = (yaw, pitch, roll, float(v[INDEX["offset_x"]]), float(v[INDEX["offset_y"]]))
        share = sum(abs(m) / max(limit, 1e-9) for m, limit in zip(moves, self.limits))
        scale = 1.0 / max(share, 1.0)
        yaw, pitch, roll, ox, oy = (m * scale for m in moves)
        c[YAW_SIN], c[YAW_COS] = math.sin(yaw), math.cos(yaw) - 1.0
        c[PITCH_SIN], c[PITCH_COS] = math.sin(pitch), math.cos(pitch) - 1.0
        c[ROLL_SIN], c[ROLL_COS] = math.sin(roll), math.cos(roll) - 1.0
        c[SHIFT_X], c[SHIFT_Y] = ox, oy
        e = {name: _unit(v[i]) for name, i in _EXPRESSION.items()}
        for side, up, down in (("left", BROW_UP_LEFT, BROW_DOWN_LEFT), ("right", BROW_UP_RIGHT, BROW_DOWN_RIGHT)):
            brow = float(v[INDEX[f"brow_{side}"]])
            c[up] = _unit(max(brow, 0.0) + e["surprised"])
            c[down] = _unit(max(-brow, 0.0) + e["angry"])
        c[BROW_INNER_UP] = e["sad"]
        c[SMILE] = _unit(e["happy"] + RELAXED_SMILE * e["relaxed"])
        c[FROWN] = _unit(e["sad"] + ANGRY_FROWN * e["angry"])
        c[EYES_WIDE] = e["surprised"]
        return c

    def positions(self, coefficients: np.ndarray) -> np.ndarray:
        """Vertex positions (V×2 float32, canvas pixels) for `coefficients` (a reused
        array: the next call overwrites it)."""
        np.dot(coefficients, self._basis_flat, out=self._out.reshape(-1))
        self._out += self.rest
        return self._out

    def oval_size(self, points: np.ndarray) -> np.ndarray:
        """Each point's distance from `center` as a multiple of the face oval's in its
        direction: < 1 inside the face."""
        return _oval_size(points, np.asarray(self.center), self.oval)

    def triangles_moved(self, coefficients: np.ndarray) -> int:
        """How many of the first `triangles` the warp at `coefficients` moves: the rest
        lie still and need not be drawn."""
        return self.drawn[1] if coefficients[HEAD_ROWS].any() else self.drawn[0]


def mouth_and_lids(pose: MouthPose, blink: float, state: AvatarState) -> tuple[MouthPose, float]:
    """The mouth pose and eyelid closure with what expressions add through the mouth
    frame and the eye meshes: surprise opens the jaw a little, relaxed lowers the lids.
    Unchanged (the same objects) without those expressions."""
    v = state.values
    surprised, relaxed = _unit(v[_EXPRESSION["surprised"]]), _unit(v[_EXPRESSION["relaxed"]])
    if surprised > 0.0 and pose.openness < SURPRISE_JAW * surprised:
        pose = MouthPose(pose.viseme_a, pose.viseme_b, pose.mix, SURPRISE_JAW * surprised)
    if relaxed > 0.0:
        blink = max(blink, RELAXED_LIDS * relaxed)
    return pose, blink


def _unit(x) -> float:
    return min(max(float(x), 0.0), 1.0)


def max_strain(positions: np.ndarray, rest: np.ndarray, shape: tuple[int, int]) -> float:
    """The most any grid cell is stretched or squashed (|σ − 1| of the warp's Jacobian,
    rotation-free); inf where a cell folds over."""
    rows, cols = shape
    p, r = positions.reshape(rows, cols, 2).astype(np.float64), rest.reshape(rows, cols, 2)
    hx = r[:-1, 1:, 0] - r[:-1, :-1, 0]
    hy = r[1:, :-1, 1] - r[:-1, :-1, 1]
    a, c = ((p[:-1, 1:, k] - p[:-1, :-1, k]) / hx for k in (0, 1))
    b, d = ((p[1:, :-1, k] - p[:-1, :-1, k]) / hy for k in (0, 1))
    det = a * d - b * c
    if (det <= 0.0).any():
        return math.inf
    t = a * a + b * b + c * c + d * d
    root = np.sqrt(np.maximum(t * t - 4.0 * det * det, 0.0))
    big, small = np.sqrt((t + root) / 2.0), np.sqrt(np.maximum((t - root) / 2.0, 0.0))
    return float(max((big - 1.0).max(), (1.0 - small).max()))


# -- building ------------------------------------------------------------------------


def build_face_warp(landmarks: np.ndarray, size: tuple[int, int]) -> FaceWarp:
    """The warp for 478 landmarks (pixels, z included) in a picture of `size`.
    Deterministic, numpy only (a saved rig rebuilds it at load)."""
    w, h = size
    pts = landmarks[:, :2].astype(np.float64)
    depth = landmarks[:, 2].astype(np.float64)
    oval = pts[list(FACE_OVAL)]
    center = oval.mean(axis=0)
    reach = np.abs(oval - center).max(axis=0) * HEAD_BORDER
    x0, y0 = np.maximum(center - reach, 0.0)
    x1, y1 = np.minimum(center + reach, (w, h))
    cols = rows = GRID + 1
    if x1 - x0 > y1 - y0:
        rows = max(2, round(GRID * (y1 - y0) / (x1 - x0)) + 1)
    else:
        cols = max(2, round(GRID * (x1 - x0) / (y1 - y0)) + 1)
    gy, gx = np.meshgrid(np.linspace(y0, y1, rows), np.linspace(x0, x1, cols), indexing="ij")
    rest = np.stack([gx.ravel(), gy.ravel()], axis=1)
    cell = max((x1 - x0) / (cols - 1), (y1 - y0) / (rows - 1))

    rho = _oval_size(rest, center, oval)
    # The grid's outermost vertices stay put even where the picture's edge cut it.
    edge = np.minimum.reduce([rest[:, 0] - x0, x1 - rest[:, 0], rest[:, 1] - y0, y1 - rest[:, 1]])
    edge_w = smoothstep(edge, 0.0, 3.0 * cell)
    w_head = (1.0 - smoothstep(rho, 1.0, HEAD_BORDER)) * edge_w
    w_expr = (1.0 - smoothstep(rho, *EXPRESSION_FADE)) * edge_w

    basis = np.zeros((ROWS, len(rest), 2))
    # Depth and handles only where their weight is not 0 (a third of the grid for the
    # expressions): the rest of the rows stays 0 there anyway.
    z = np.zeros(len(rest))
    moving = w_head > 0.0
    z[moving] = _depth_at(rest[moving], pts, depth, float(np.ptp(oval[:, 0])))
    sides = pts[list(FACE_SIDES)].mean(axis=0)
    pivot_z = float(depth[list(FACE_SIDES)].mean())
    basis[YAW_SIN, :, 0] = z - pivot_z
    basis[YAW_COS, :, 0] = rest[:, 0] - sides[0]
    basis[PITCH_SIN, :, 1] = z - pivot_z
    basis[PITCH_COS, :, 1] = rest[:, 1] - sides[1]
    eyes = pts[[c for pair in EYE_CORNERS for c in pair]].mean(axis=0)
    neck = pts[CHIN] + NECK_BELOW_CHIN * (pts[CHIN] - eyes)
    arm = rest - neck
    basis[ROLL_SIN] = np.stack([arm[:, 1], -arm[:, 0]], axis=1)
    basis[ROLL_COS] = arm
    basis[SHIFT_X, :, 0] = w
    basis[SHIFT_Y, :, 1] = -h
    basis[HEAD_ROWS] *= w_head[None, :, None]

    expressive = w_expr > 0.0
    basis[8:, expressive] = _expressions(rest[expressive], pts)
    basis[8:] *= w_expr[None, :, None]
    shape = (rows, cols)
    for row in range(8, ROWS):
        basis[row] *= _fit_strain(rest, basis[row:row + 1], shape, 1.0, limit=MAX_EXPRESSION_STRAIN)
    limits = tuple(_fit_strain(rest, basis[rows_], shape, top, trig, signs=(1.0, -1.0)) for rows_, top, trig in (
        ([YAW_SIN, YAW_COS], MAX_YAW, True), ([PITCH_SIN, PITCH_COS], MAX_PITCH, True),
        ([ROLL_SIN, ROLL_COS], MAX_ROLL, True), ([SHIFT_X], 1.0, False), ([SHIFT_Y], 1.0, False)))
    quads = (np.arange(rows - 1)[:, None] * cols + np.arange(cols - 1)[None, :]).ravel()
    triangles = np.concatenate([np.stack([quads, quads + 1, quads + cols], axis=1),
                                np.stack([quads + 1, quads + cols + 1, quads + cols], axis=1)])
    # The triangles expressions move first, then those only the head moves, then those
    # nothing moves (they would draw their own pixels again): a frame draws the first
    # range, or the first two, alone.
    basis = basis.astype(np.float32)
    by_expression = (basis[8:] != 0.0).any(axis=(0, 2))[triangles].any(axis=1)
    by_head = (basis[HEAD_ROWS] != 0.0).any(axis=(0, 2))[triangles].any(axis=1) | by_expression
    order = np.argsort(np.where(by_expression, 0, np.where(by_head, 1, 2)), kind="stable")
    return FaceWarp(rest=rest.astype(np.float32), basis=basis,
                    triangles=np.ascontiguousarray(triangles[order], dtype=np.uint32),
                    drawn=(int(by_expression.sum()), int(by_head.sum())), shape=shape,
                    rect=(float(x0), float(y0), float(x1), float(y1)), limits=limits,
                    oval=oval.astype(np.float32), center=(float(center[0]), float(center[1])))


def _oval_size(points: np.ndarray, center: np.ndarray, oval: np.ndarray) -> np.ndarray:
    """Distance from `center` over the oval's radius in that direction (the face oval is
    star-shaped about its centroid)."""
    rel = np.asarray(oval, np.float64) - center
    angles = np.arctan2(rel[:, 1], rel[:, 0])
    order = np.argsort(angles)
    angles, radii = angles[order], np.hypot(rel[order, 0], rel[order, 1])
    d = np.asarray(points, np.float64) - center
    phi = np.arctan2(d[:, 1], d[:, 0])
    r = np.interp(phi, angles, radii, period=2.0 * np.pi)
    return np.hypot(d[:, 0], d[:, 1]) / r


def _depth_at(points: np.ndarray, landmarks: np.ndarray, depth: np.ndarray, face_width: float) -> np.ndarray:
    """The landmarks' depth carried to any point: a Gaussian-weighted mean of the
    nearest ones (sigma a tenth of the face's width), which far from the face tends to
    its nearest landmarks' depth."""
    sigma = 0.1 * face_width
    # |p − l|² less |p|², from one float32 matrix product: each row's own constant goes
    # with its minimum anyway, and a rig loads in about a millisecond for this, not 15.
    p, lm = points.astype(np.float32), landmarks.astype(np.float32)
    d2 = p @ (-2.0 * lm.T)
    d2 += (lm * lm).sum(axis=1)[None, :]
    d2 -= d2.min(axis=1, keepdims=True)
    d2 *= np.float32(-0.5 / (sigma * sigma))
    weights = np.exp(d2, out=d2)
    return (weights @ depth.astype(np.float32)) / weights.sum(axis=1)


def _expressions(rest: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """The expression rows (ROWS − 8 × N × 2) at points `rest`, not yet windowed. Where a
    row's handles overlap, their moves are averaged by weight rather than added, so two
    brows' inner ends do not lift the skin between them twice."""
    ew = float(np.mean([np.linalg.norm(pts[a] - pts[b]) for a, b in EYE_CORNERS]))
    right, left = pts[MOUTH_CORNERS[0]], pts[MOUTH_CORNERS[1]]
    mw = float(np.linalg.norm(left - right))
    across = (left - right) / mw                       # the person's right to left
    up = np.array([across[1], -across[0]])             # towards the forehead
    handles: dict[int, list[tuple[np.ndarray, np.ndarray, tuple[float, float]]]] = {
        row: [] for row in range(8, ROWS)}
    rows = np.zeros((ROWS - 8, len(rest), 2))
    brows = {side: 0.5 * (pts[list(upper)] + pts[list(lower)])
             for side, (upper, lower) in (("left", BROW_LEFT), ("right", BROW_RIGHT))}
    nose_bridge = 0.5 * (brows["left"][-1] + brows["right"][-1])
    lids = {"left": pts[list(UPPER_LID_LEFT)], "right": pts[list(UPPER_LID_RIGHT)]}
    for side, up_row, down_row in (("left", BROW_UP_LEFT, BROW_DOWN_LEFT),
                                   ("right", BROW_UP_RIGHT, BROW_DOWN_RIGHT)):
        brow = brows[side]
        gap = float(np.linalg.norm(brow.mean(axis=0) - lids[side].mean(axis=0)))
        reach = (BROW_REACH_UP * ew, BROW_REACH_DOWN * gap)
        along = np.linspace(0.0, 1.0, len(brow))[:, None]          # outer 0 .. inner 1
        handles[up_row].append((brow, np.tile(up * BROW_RAISE * ew, (len(brow), 1)), reach))
        inward = (nose_bridge - brow[-1]) / max(float(np.linalg.norm(nose_bridge - brow[-1])), 1e-6)
        lower = -up * BROW_LOWER * ew * (0.4 + 0.6 * along) + inward * BROW_INWARD * ew * along
        handles[down_row].append((brow, lower, reach))
        handles[BROW_INNER_UP].append((brow, up * BROW_INNER_RAISE * ew * along ** 2, reach))
    for corner, cheek, out in ((right, pts[CHEEKS[0]], -across), (left, pts[CHEEKS[1]], across)):
        mouth_reach = (SMILE_REACH * mw,) * 2
        handles[SMILE].append((corner[None, :], ((up * SMILE_UP + out * SMILE_OUT) * mw)[None, :], mouth_reach))
        handles[SMILE].append((cheek[None, :], (up * CHEEK_UP * mw)[None, :], (CHEEK_REACH * mw,) * 2))
        handles[FROWN].append((corner[None, :], (-up * FROWN_DOWN * mw)[None, :], mouth_reach))
    for upper, lower in ((UPPER_LID_LEFT, LOWER_LID_LEFT), (UPPER_LID_RIGHT, LOWER_LID_RIGHT)):
        for lid, move in ((upper, up * LID_UP), (lower, -up * LID_DOWN)):
            line = pts[list(lid)]
            handles[EYES_WIDE].append((line, np.tile(move * ew, (len(line), 1)), (LID_REACH * ew,) * 2))
    for row, row_handles in handles.items():
        moved, weight = np.zeros((len(rest), 2)), np.zeros(len(rest))
        for line, moves, reach in row_handles:
            move, g = _handle(rest, line, moves, up, reach)
            moved += move * g[:, None]
            weight += g
        rows[row - 8] = moved / np.maximum(weight, 1.0)[:, None]
    return rows


def _handle(points: np.ndarray, line: np.ndarray, moves: np.ndarray, up: np.ndarray,
            reach: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """How a polyline `line` (one point or more) whose points move by `moves` drags
    `points`: the move of the line's nearest point (interpolated along its segments),
    and a Gaussian weight of the distance to it, of radius reach[0] on the `up` side of
    the line and reach[1] below it."""
    best = np.full(len(points), np.inf)
    move = np.zeros((len(points), 2))
    side = np.zeros(len(points))
    for i, j in ([(0, 0)] if len(line) == 1 else [(i, i + 1) for i in range(len(line) - 1)]):
        a, ab = line[i], line[j] - line[i]
        t = np.clip(((points - a) @ ab) / float(ab @ ab), 0.0, 1.0) if j != i else np.zeros(len(points))
        near = a + t[:, None] * ab
        d = np.hypot(*(points - near).T)
        closer = d < best
        best = np.where(closer, d, best)
        move = np.where(closer[:, None], moves[i] + t[:, None] * (moves[j] - moves[i]), move)
        side = np.where(closer, (points - near) @ up, side)
    radius = np.where(side > 0.0, reach[0], reach[1])
    return move, np.exp(-best * best / (2.0 * radius * radius))


def _fit_strain(rest: np.ndarray, rows: np.ndarray, shape: tuple[int, int], top: float,
                trig: bool = False, limit: float = MAX_STRAIN, signs: tuple[float, ...] = (1.0,)) -> float:
    """The largest amount up to `top` for which `rows` stay within `limit`'s strain,
    taken with each of `signs`: a scale for one linear row, or an angle whose sine and
    cosine − 1 weight two (`trig`). Found to 1/256 of `top` (0.08° of a 20° limit)."""
    def strain(amount: float) -> float:
        worst = 0.0
        for sign in signs:
            a = sign * amount
            c = [math.sin(a), math.cos(a) - 1.0] if trig else [a]
            worst = max(worst, max_strain(rest + np.tensordot(c, rows, axes=1), rest, shape))
        return worst

    if strain(top) <= limit:
        return top
    lo, hi = 0.0, top
    for _ in range(8):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if strain(mid) <= limit else (lo, mid)
    return lo
