"""The photo rig's head pose and expressions on the CUDA path: CudaPhotoRenderer makes
the mouth frame and inherits the GL composite and face warp, so its whole frames at any
AvatarState are GL's within the mouth frame's own bound. Needs an NVIDIA GPU with
CUDA-GL interop (the H200 test machine, through EGL); CI has none and skips, saying so.
Run this file on its own, as tests/test_gpu_frames.py."""

import numpy as np
import pytest

from tests.harness.cuda_gl import cuda_gl_target

TARGET = cuda_gl_target(512, 512)

from pipeline.core.avatar_state import INDEX, AvatarState  # noqa: E402
from pipeline.core.frames import MouthPose  # noqa: E402
from pipeline.core.visemes import VISEME_INDEX  # noqa: E402
from render.gl.photo_renderer import PhotoRenderer  # noqa: E402
from render.gpu.cuda_photo_renderer import CudaPhotoRenderer  # noqa: E402
from tests.harness.drawn_portrait import drawn_portrait, near_opening_edges  # noqa: E402

# The mouth frames are within 2 levels of each other away from the opening's edges
# (tests/test_gpu_frames.py); the warp blends up to four of their texels into a pixel
# and each side rounds its blend to 8 bits: 3 at most. Measured on the H200: whole
# frames at most 1 apart, ties included, in both cases below.
BOUND = 3
# A mouth texel at a tie of the opening's edges shows in the pixels the warp's filter
# reaches from it: up to 3×3 where the face is stretched (at most 1.5 times, MAX_EXPRESSION_STRAIN).
PIXELS_PER_TIE = 9


def state(pose: MouthPose, blink: float = 0.0, breath: float = 0.0, **fields: float) -> AvatarState:
    s = AvatarState()
    s.set_mouth(pose)
    s.set_blink(blink)
    s.breath = breath
    for name, value in fields.items():
        s.values[INDEX[name] if name in INDEX else INDEX[f"expression_{name}"]] = value
    return s


AA = MouthPose(VISEME_INDEX["aa"], VISEME_INDEX["aa"], 0.0, 1.0)
OH = MouthPose(VISEME_INDEX["oh"], VISEME_INDEX["E"], 0.4, 0.6)
SIL = MouthPose(0, 0, 0.0, 0.0)
STATES = [
    state(SIL),
    state(AA, yaw=0.12),
    state(OH, roll=-0.06, pitch=0.1, breath=0.6),
    state(SIL, surprised=1.0, brow_left=-0.5),
    state(AA, blink=0.7, happy=1.0, yaw=-0.1, offset_y=0.01),
    state(OH, sad=0.6, angry=0.4, relaxed=0.5, roll=0.05),
]


def _frames(renderer_type, rig):
    TARGET.make_current()
    renderer = renderer_type()
    renderer.initialize()
    renderer.set_rig(rig)
    renderer.resize(512, 512)
    frames = []
    for s in STATES:
        renderer.draw_state(s)
        frames.append(renderer.read_pixels().astype(np.int16))
    renderer.release()
    return frames


@pytest.mark.parametrize("closed_lips", [False, True], ids=["photo teeth", "drawn teeth"])
def test_cuda_photo_frames_turn_and_smile_as_the_gl_ones(closed_lips, record_property):
    from render.rigs.photo_face import mouth_and_lids

    rig = drawn_portrait(closed_lips)
    TARGET.resize(512, 512)
    gl_frames, cuda_frames = _frames(PhotoRenderer, rig), _frames(CudaPhotoRenderer, rig)
    x0, y0, x1, y1 = rig.mouth_rect
    ties_total, worst = 0, 0
    for s, a, b in zip(STATES, gl_frames, cuda_frames):
        # The mouth frame's ties (drawn_portrait.near_opening_edges) at the pose it shows.
        shown, _ = mouth_and_lids(s.mouth_pose(), s.eyes_closed, s)
        ties = int(near_opening_edges(rig, shown, (x1 - x0, y1 - y0)).sum())
        diff = np.abs(a - b).max(axis=2)
        over = int((diff > BOUND).sum())
        ties_total, worst = ties_total + ties, max(worst, int(diff.max()))
        assert over <= PIXELS_PER_TIE * ties, (s.values, over, ties)
    record_property("tie_texels", ties_total)
    print(f"\nclosed lips {closed_lips}: whole frames at most {worst} apart, over {BOUND} only "
          f"at ties ({ties_total} tie texels in {len(STATES)} frames)")
    # Not stuck frames: every moved state is another picture than the still one, on both.
    for frames in (gl_frames, cuda_frames):
        assert all((f != frames[0]).any() for f in frames[1:])
