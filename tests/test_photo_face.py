"""A photo avatar's head pose and expressions, with real components: skimage's astronaut
imported with the real MediaPipe model, drawn by PhotoRenderer on Mesa GL under Xvfb, and
the drawn faces read back by the same landmarker, as a viewer would see them."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from pipeline.core.avatar_state import INDEX, AvatarState
from pipeline.core.frames import MouthPose
from pipeline.core.visemes import VISEME_INDEX

pytestmark = pytest.mark.display

SIZE = 512
SIL = MouthPose(0, 0, 0.0, 0.0)
NOSE_TIP, EYE_OUTER_RIGHT, EYE_OUTER_LEFT = 4, 33, 263


def state(pose: MouthPose = SIL, **fields: float) -> AvatarState:
    """A state at `pose` with fields set by name (expressions by theirs: happy=1)."""
    s = AvatarState()
    s.set_mouth(pose)
    for name, value in fields.items():
        s.values[INDEX[name] if name in INDEX else INDEX[f"expression_{name}"]] = value
    return s


# The astronaut's rig, GL target and renderer (conftest), by this module's names.
@pytest.fixture(scope="module")
def rig(astronaut_rig):
    return astronaut_rig


@pytest.fixture(scope="module")
def target(astronaut_target):
    return astronaut_target


@pytest.fixture(scope="module")
def renderer(astronaut_renderer):
    return astronaut_renderer


def resized(target, renderer, width: int, height: int) -> None:
    target.resize(width, height)
    renderer.resize(width, height)


def render(r, s: AvatarState) -> np.ndarray:
    r.draw_state(s)
    return r.read_pixels()


def face(landmarker, image: np.ndarray):
    """The landmarks (478×2 px) and blendshapes of the picture's largest face."""
    found = max(landmarker.detect(image), key=lambda f: f.width)
    return found.points[:, :2], found.blendshapes


@pytest.fixture(scope="module")
def neutral(renderer, landmarker):
    image = render(renderer, state())
    return image, *face(landmarker, image)


def pixel_centres() -> np.ndarray:
    y, x = np.mgrid[0:SIZE, 0:SIZE] + 0.5
    return np.stack([x.ravel(), y.ravel()], axis=1)


def test_a_still_state_draws_todays_frames_exactly(renderer, rig):
    """No head pose and no expression: the face warp does not run, and the frame is what
    the renderer drew before it had one, the picture untouched outside the mouth frame
    and the eyes."""
    from render.gl.sprite_renderer import premultiplied

    picture = premultiplied(rig.image)
    x0, y0, x1, y1 = rig.mouth_rect
    outside = np.ones((SIZE, SIZE), bool)
    outside[y0:y1, x0:x1] = False
    for pose, blink, breath in ((SIL, 0.0, 0.0), (MouthPose(VISEME_INDEX["aa"], VISEME_INDEX["E"], 0.3, 0.8), 0.0, 0.0),
                                (MouthPose(VISEME_INDEX["ou"], VISEME_INDEX["ou"], 0.0, 0.4), 1.0, 0.7)):
        renderer.draw(pose, blink, breath)
        plain = renderer.read_pixels()
        s = state(pose, breath=breath)
        s.set_blink(blink)
        assert np.array_equal(render(renderer, s), plain)
        if blink == 0.0 and breath == 0.0:
            assert np.array_equal(plain[outside], picture[outside])


def test_yaw_turns_the_nose_more_than_the_face_outline(renderer, rig, landmarker, neutral, record_property):
    """A parallax: each point moves by its depth in front of the neck's axis times sin(yaw)
    (render/rigs/photo_face.py), so the nose tip moves by the most and follows the angle,
    and the face's sides, at the pivot's depth, move much less."""
    from render.rigs.photo_face import FACE_SIDES

    _, rest, _ = neutral
    limit = rig.face.limits[0]
    depth = rig.landmarks[:, 2]
    lever = float(depth[NOSE_TIP] - depth[list(FACE_SIDES)].mean())
    rows = []
    for yaw in (0.8 * limit, 0.4 * limit, -0.8 * limit):
        points, _ = face(landmarker, render(renderer, state(yaw=yaw)))
        moved = points - rest
        expected = lever * math.sin(yaw)
        rows.append((yaw, expected, moved[NOSE_TIP, 0], moved[list(FACE_SIDES), 0].mean()))
    table = "\n".join(f"yaw {math.degrees(y):+5.2f}°: nose {m:+6.2f} px (model {e:+6.2f}), sides {s:+5.2f} px"
                      for y, e, m, s in rows)
    print(f"\nyaw limit {math.degrees(limit):.2f}°\n{table}")
    record_property("yaw_shifts", table)
    for yaw, expected, nose, sides in rows:
        # Positive yaw turns to the viewer's left: the nose (nearer than the pivot, lever < 0) goes left.
        assert np.sign(nose) == np.sign(expected) == -np.sign(yaw)
        # The landmarker fits the whole face again, pulling the nose tip towards its
        # neighbours' smaller moves: measured 1-23 % short of the model (the most turning
        # to the viewer's right), so 30 % short and 1 px either way.
        assert 0.7 * abs(expected) - 1.0 < abs(nose) < 1.1 * abs(expected) + 1.0
        # The sides lie at the pivot's depth: the model moves them by < 0.2 px; the
        # landmarker's fit drags them along by 27-53 % of the nose's shift (measured).
        assert abs(sides) < 0.6 * abs(nose)
    # Half the angle, about half the shift (sin is linear to 0.3 % at these angles).
    assert 0.4 < rows[1][2] / rows[0][2] < 0.6


def test_roll_turns_the_eye_line_by_the_angle(renderer, rig, landmarker, neutral):
    """Roll rotates the face rigidly about the neck, counter-clockwise as seen for
    positive angles: the line between the outer eye corners turns by the angle."""
    _, rest, _ = neutral

    def eye_angle(points):
        dx, dy = points[EYE_OUTER_LEFT] - points[EYE_OUTER_RIGHT]
        return math.atan2(-dy, dx)      # y up, so counter-clockwise is positive

    limit = rig.face.limits[2]
    for roll in (0.9 * limit, -0.9 * limit, 0.45 * limit):
        points, _ = face(landmarker, render(renderer, state(roll=roll)))
        turned = eye_angle(points) - eye_angle(rest)
        print(f"\nroll {math.degrees(roll):+.2f}°: eye line turned {math.degrees(turned):+.2f}°")
        # The eye corners, ~50 px apart, are found within ~0.3 px (the neutral frame's
        # landmarks against the rig's): 0.5° either way, and the corners lie in the
        # face's rigid part.
        assert abs(turned - roll) < math.radians(0.6)


def test_the_background_stays_where_it_is(renderer, rig, neutral):
    """Hair, neck and background beyond HEAD_BORDER times the face oval are anchored:
    those pixels are the neutral frame's exactly, whatever the head does."""
    from render.rigs.photo_face import HEAD_BORDER

    image, _, _ = neutral
    face_warp = rig.face
    cell = (face_warp.rect[2] - face_warp.rect[0]) / (face_warp.shape[1] - 1)
    reach = face_warp.oval_size(pixel_centres()).reshape(SIZE, SIZE)
    # A pixel beyond the border by one cell's diagonal lies only in cells whose corners
    # all stay put.
    radius = float(np.abs(face_warp.oval - face_warp.center).max())
    anchored = reach > HEAD_BORDER + math.sqrt(2.0) * cell / radius
    assert anchored.mean() > 0.7
    limits = face_warp.limits
    for fields in (dict(yaw=limits[0]), dict(pitch=-limits[1]), dict(roll=limits[2]),
                   dict(offset_x=limits[3], offset_y=-limits[4]), dict(yaw=0.1, roll=0.05, offset_y=0.01)):
        moved = render(renderer, state(**fields))
        changed = np.any(moved != image, axis=2)
        assert changed.sum() > 5000, fields
        assert not changed[anchored].any(), fields


def test_head_motion_is_held_to_the_rigs_limits(renderer, rig, neutral):
    from render.rigs.photo_face import MAX_STRAIN, max_strain

    face_warp = rig.face
    yaw_limit, pitch_limit, roll_limit, *_ = face_warp.limits
    print(f"\nlimits: yaw {math.degrees(yaw_limit):.2f}°, pitch {math.degrees(pitch_limit):.2f}°, "
          f"roll {math.degrees(roll_limit):.2f}°, offsets {face_warp.limits[3]:.4f}, {face_warp.limits[4]:.4f}")
    # Past its limit a motion is drawn at the limit.
    assert np.array_equal(render(renderer, state(yaw=3 * yaw_limit)), render(renderer, state(yaw=yaw_limit)))
    for fields in (dict(yaw=yaw_limit), dict(pitch=pitch_limit), dict(roll=-roll_limit),
                   dict(offset_x=face_warp.limits[3]), dict(yaw=0.3, pitch=-0.3, roll=0.2, offset_y=0.05)):
        positions = face_warp.positions(face_warp.coefficients(state(**fields)))
        assert max_strain(positions, face_warp.rest, face_warp.shape) <= MAX_STRAIN * 1.001, fields


def test_smile_raises_the_mouth_corners(renderer, landmarker, neutral, record_property):
    _, rest, shapes = neutral
    points, smiling = face(landmarker, render(renderer, state(happy=1.0)))
    up = rest[[61, 291], 1] - points[[61, 291], 1]
    print(f"\nsmile: corners up {up.round(2)} px, mouthSmile "
          f"{shapes['mouthSmileLeft']:.2f}/{shapes['mouthSmileRight']:.2f} → "
          f"{smiling['mouthSmileLeft']:.2f}/{smiling['mouthSmileRight']:.2f}")
    record_property("smile_corners_up_px", up.tolist())
    # SMILE_UP is 0.16 of the 42-px mouth's width (6.7 px) at the corner handle, less
    # where the cheeks' handles share the skin: measured 5.4-5.9 px.
    assert (up > 3.0).all()
    for side in ("Left", "Right"):
        assert smiling[f"mouthSmile{side}"] > shapes[f"mouthSmile{side}"] + 0.04
    points, sad = face(landmarker, render(renderer, state(sad=1.0)))
    assert (points[[61, 291], 1] - rest[[61, 291], 1] > 2.0).all()
    assert sad["browInnerUp"] > shapes["browInnerUp"] + 0.15


def test_brows_and_surprise(renderer, landmarker, neutral):
    """brow_left raises the person's left brow (on the picture's right); surprise raises
    both, widens the eyes and drops the jaw; angry lowers the brows."""
    from render.rigs.photo_face import BROW_LEFT, BROW_RIGHT

    _, rest, shapes = neutral
    left, right = list(BROW_LEFT[0]), list(BROW_RIGHT[0])
    points, _ = face(landmarker, render(renderer, state(brow_left=1.0)))
    lift = rest[:, 1] - points[:, 1]
    assert lift[left].mean() > 1.5 and lift[left].mean() > 3 * abs(lift[right].mean())
    points, surprised = face(landmarker, render(renderer, state(surprised=1.0)))
    lift = rest[:, 1] - points[:, 1]
    assert lift[left].mean() > 1.5 and lift[right].mean() > 1.5
    # Measured +0.33, +0.08/+0.24 and +0.05 over the neutral frame's.
    assert surprised["browInnerUp"] > shapes["browInnerUp"] + 0.15
    assert surprised["eyeWideLeft"] + surprised["eyeWideRight"] > shapes["eyeWideLeft"] + shapes["eyeWideRight"] + 0.1
    assert surprised["jawOpen"] > shapes["jawOpen"] + 0.02
    points, _ = face(landmarker, render(renderer, state(angry=1.0)))
    assert (points[left + right, 1] - rest[left + right, 1]).mean() > 0.5


def test_expressions_leave_everything_outside_the_face_unchanged(renderer, rig, neutral):
    from render.rigs.photo_face import EXPRESSION_FADE

    image, _, _ = neutral
    face_warp = rig.face
    cell = (face_warp.rect[2] - face_warp.rect[0]) / (face_warp.shape[1] - 1)
    radius = float(np.abs(face_warp.oval - face_warp.center).max())
    reach = face_warp.oval_size(pixel_centres()).reshape(SIZE, SIZE)
    beyond = reach > EXPRESSION_FADE[1] + math.sqrt(2.0) * cell / radius
    # Surprise drops the jaw a little, as speech does: the mouth frame's jaw carries the
    # chin down over the neck, within the mouth frame's rectangle.
    jaw = np.zeros_like(beyond)
    x0, y0, x1, y1 = rig.mouth_rect
    jaw[y0:y1, x0:x1] = True
    for fields in (dict(happy=1.0), dict(surprised=1.0), dict(sad=1.0), dict(angry=1.0), dict(relaxed=1.0),
                   dict(brow_left=1.0, brow_right=-1.0),
                   dict(happy=1.0, surprised=1.0, sad=1.0, angry=1.0, relaxed=1.0, brow_left=-1.0, brow_right=1.0)):
        changed = np.any(render(renderer, state(**fields)) != image, axis=2)
        assert changed.sum() > 1000, fields
        outside = beyond & ~jaw if "surprised" in fields else beyond
        assert not changed[outside].any(), fields


def test_no_expression_folds_the_face(rig):
    """Each expression row at full weight, and all at once, keeps every cell within
    MAX_EXPRESSION_STRAIN of its size: the warp never turns a cell over."""
    from render.rigs.photo_face import MAX_EXPRESSION_STRAIN, ROWS, max_strain

    face_warp = rig.face
    for row in range(8, ROWS):
        c = np.zeros(ROWS, np.float32)
        c[row] = 1.0
        strain = max_strain(face_warp.positions(c), face_warp.rest, face_warp.shape)
        assert strain <= MAX_EXPRESSION_STRAIN * 1.001, row
    everything = face_warp.coefficients(state(happy=1, surprised=1, sad=1, angry=1, relaxed=1, brow_left=1,
                                              brow_right=-1, yaw=1, roll=-1, offset_y=1))
    assert math.isfinite(max_strain(face_warp.positions(everything), face_warp.rest, face_warp.shape))


def test_the_warp_costs_a_few_milliseconds(renderer):
    """Printed, not bounded (noisy on the shared 2-core VM): the face's copy and redraw
    on top of the frame it warps."""
    times = {}
    for name, s in (("still", state()), ("head and smile", state(yaw=0.1, roll=0.03, happy=1.0))):
        render(renderer, s)
        started = time.perf_counter()
        for _ in range(20):
            render(renderer, s)
        times[name] = (time.perf_counter() - started) / 20 * 1e3
    print(f"\nframe with read-back at {SIZE}²: " + ", ".join(f"{k} {v:.2f} ms" for k, v in times.items()))


def test_the_warp_follows_the_letterbox_breathing_fades_and_smaller_views(renderer, target, rig):
    """The warp works on the frame as shown: in a wider view the canvas's pixels are the
    square view's, breathing included, and the bars stay clear; a faded avatar's warp is
    the faded warp; at half the size the frame is the full one averaged 2×2."""
    moved = state(yaw=rig.face.limits[0], roll=rig.face.limits[2] / 2, happy=1.0, breath=0.8)
    square = render(renderer, moved)
    # At rest breathing: a faded frame samples the picture where the full one copies the
    # phase stills (within 1/16 row), which alone differ by a few levels when breathing.
    unbreathing = state(yaw=rig.face.limits[0], happy=1.0)
    full_opacity = render(renderer, unbreathing).astype(int)
    renderer.draw_state(unbreathing, 0.5)
    # The faded frame is rounded to 8 bits before the warp samples it, and the warp's
    # sample is rounded again: a level and a half from half the full frame at most.
    assert np.abs(renderer.read_pixels().astype(int) - full_opacity * 0.5).max() <= 1.5
    try:
        resized(target, renderer, 2 * SIZE, SIZE)
        wide = render(renderer, moved)
        resized(target, renderer, SIZE // 2, SIZE // 2)
        # At rest breathing, as the unwarped frame's test at half size (breathing alone
        # takes that comparison past its bounds: measured mean 1.61, p99 14 at 0.8).
        half = render(renderer, unbreathing).astype(float)
        still_half = render(renderer, state()).astype(float)
    finally:
        resized(target, renderer, SIZE, SIZE)
    # The same warp, its clip-space positions rounded for another viewport: measured 28
    # pixels a level apart, where a sample fell on the other side of a filter step.
    assert np.abs(wide[:, SIZE // 2:SIZE // 2 + SIZE].astype(int) - square).max() <= 1
    assert not wide[:, :SIZE // 2].any() and not wide[:, SIZE // 2 + SIZE:].any()
    box = full_opacity.astype(float).reshape(SIZE // 2, 2, SIZE // 2, 2, 4).mean(axis=(1, 3))
    diff = np.abs(half - box).max(axis=2)
    print(f"\nwarped at half size against the full frame averaged 2×2: mean {diff.mean():.2f}, "
          f"p99 {np.percentile(diff, 99):.1f}, max {diff.max():.0f}")
    # The unwarped frame's own bounds at half size (tests/test_photo_rig.py): the warp
    # resamples the already-halved frame once more, inside the face alone (measured mean
    # 0.93, p99 7.2, against the unwarped frame's 0.70 and 1.0).
    assert diff.mean() < 1.5 and np.percentile(diff, 99) < 10
    assert np.abs(half - still_half).max(axis=2).sum() > 0
