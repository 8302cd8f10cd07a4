"""Frames made by CUDA against the GL shader path on the same GPU, within 2/255 of each
other, with no host copy per frame: the sprite rig's (render/gpu/cuda_sprite_renderer.py;
every viseme pair, blinks, breathing, fades) and the photo rig's mouth frame
(render/gpu/cuda_photo_renderer.py; every viseme, open and shut, mixed, with the
photo's teeth and drawn ones, shown at full size and smaller); and the app's choice
between the two paths, timed at start (render/gpu/path_picker.py). Needs an NVIDIA GPU
with CUDA-GL interop (the H200 test machine, through EGL); CI has none and skips,
saying so."""

import os
import re

import numpy as np
import pytest

from tests.harness.cuda_gl import cuda_gl_target

TARGET = cuda_gl_target(512, 384)

from OpenGL import GL  # noqa: E402

from pipeline.core.frames import MouthPose  # noqa: E402
from pipeline.core.visemes import OVR_VISEMES  # noqa: E402
from render.gl.photo_renderer import PhotoRenderer  # noqa: E402
from render.gl.sprite_renderer import SpriteGLRenderer  # noqa: E402
from render.gpu.cuda_photo_renderer import CudaPhotoRenderer  # noqa: E402
from render.gpu.cuda_sprite_renderer import CudaSpriteRenderer, cuda_unavailable  # noqa: E402
from render.gpu.mouth_path import CUDA, NAMES, OPENGL, choose  # noqa: E402
from render.gpu.path_picker import MouthPathPicker  # noqa: E402
from render.gpu.path_timing import MEASURED_FRAMES  # noqa: E402
from render.rigs.loader import renderer_type  # noqa: E402
from tests.harness.drawn_portrait import (  # noqa: E402
    COMPARED_POSES,
    MIPMAP_SHARE_OVER_BOUND,
    compare_mouth_frames,
    drawn_portrait,
)
from tests.harness.drawn_rig import drawn_rig  # noqa: E402

# GL samples textures with 8-bit filter weights, the kernel with float ones, and each
# rounds every layer to 8 bits: a level either way per layer, at most 2 in all (the
# issue's bound). Measured on the H200: at most 1 level apart at 512² and 1024²
# (bench/results/gpu.json, mouth_frames.max_diff_*).
BOUND = 2

POSES = [(MouthPose(a, b, mix, 0.5), blink, breath, opacity)
         for a in range(len(OVR_VISEMES)) for b in (a, (a + 3) % len(OVR_VISEMES))
         for mix, blink, breath, opacity in ((0.0, 0.0, 0.0, 1.0), (0.37, 0.6, 0.8, 0.75))]


def _frames(renderer_type, size, rig):
    TARGET.make_current()
    renderer = renderer_type()
    renderer.initialize()
    renderer.set_rig(rig)
    renderer.resize(*size)
    frames = []
    for pose, blink, breath, opacity in POSES:
        renderer.draw(pose, blink, breath, opacity)
        frames.append(renderer.read_pixels().astype(np.int16))
    copies = getattr(renderer, "host_copies", 0)
    renderer.release()
    return frames, copies


@pytest.mark.parametrize("size", [(512, 384), (384, 512)])
def test_cuda_frames_equal_the_gl_frames(size):
    rig = drawn_rig(256)
    TARGET.resize(*size)
    gl, _ = _frames(SpriteGLRenderer, size, rig)
    cuda, copies = _frames(CudaSpriteRenderer, size, rig)
    worst = max(int(np.abs(a - b).max()) for a, b in zip(gl, cuda))
    assert worst <= BOUND
    # Poses that show other drawings (or blinks, breaths, fades) give other frames, and
    # only those: the comparison is not of empty or stuck frames. A mouth is drawn whole,
    # the dominant one (no cross-fade: a mid-blend frame showed two mouths).
    drawing = [rig.viseme_to_mouth[v] for v in OVR_VISEMES]
    shown = {(drawing[pose.dominant], blink, breath, opacity)
             for pose, blink, breath, opacity in POSES}
    assert len({frame.tobytes() for frame in cuda}) == len(shown)
    # Host copies: one per rig image at set_rig (base, two eyes, the mouths, and the
    # drawn rig's expression layers: happy eyes, a blush, a tear), none per frame.
    assert copies == 3 + len(rig.mouths) + 3


PHOTO_POSES = COMPARED_POSES


def _photo_frames(renderer_type, view: int, rig):
    """(mouth frames, whole frames, mouth frame size, host copies, vertex uploads) over
    PHOTO_POSES, with a blink, a breath and a fade on every fifth."""
    TARGET.make_current()
    renderer = renderer_type()
    renderer.initialize()
    renderer.set_rig(rig)
    renderer.resize(view, view)
    mouths, frames = [], []
    for i, pose in enumerate(PHOTO_POSES):
        extra = (0.7, 0.5, 0.8) if i % 5 == 4 else (0.0, 0.0, 1.0)
        renderer.draw(pose, *extra)
        mouths.append(renderer.read_mouth_frame().astype(np.int16))
        frames.append(renderer.read_pixels().astype(np.int16))
    size = renderer.mouth_size
    counts = (getattr(renderer, "host_copies", 0), getattr(renderer, "vertex_uploads", 0))
    renderer.release()
    return mouths, frames, size, *counts


@pytest.mark.parametrize("closed_lips", [False, True], ids=["photo teeth", "drawn teeth"])
@pytest.mark.parametrize("view", [512, 320], ids=["full size", "shown smaller"])
def test_cuda_photo_mouth_frames_equal_the_gl_ones(closed_lips, view, record_property):
    rig = drawn_portrait(closed_lips)
    assert (rig.static[np.unique(rig.cavity_triangles), 0].max() > 0.5) != closed_lips
    TARGET.resize(view, view)
    gl_mouths, gl_frames, size, _, _ = _photo_frames(PhotoRenderer, view, rig)
    mouths, frames, _, copies, uploads = _photo_frames(CudaPhotoRenderer, view, rig)
    # Away from the opening's edges, where either rasteriser's rounding owns a pixel
    # centre (drawn_portrait.near_opening_edges), every pixel within BOUND; the ties
    # over it are counted and said. Shown smaller, the frame samples mipmaps: GL takes a
    # 2×2 quad's level from differences across the quad, the kernel from the same
    # gradients computed per triangle, so at a switch between levels they may take
    # neighbours (on llvmpipe against the CPU build: 55 of 265,000 pixels;
    # tests/test_kernels_on_cpu.py), and the same share as there is allowed.
    worst, ties = compare_mouth_frames(rig, PHOTO_POSES, gl_mouths, mouths, size, BOUND)
    share = float(np.mean([(np.abs(a - b).max(axis=2) > BOUND).mean() for a, b in zip(gl_mouths, mouths)]))
    # The composite (GL's in both) shows each mouth texel in at most 4 pixels.
    over = max(int((np.abs(a - b).max(axis=2) > BOUND).sum()) for a, b in zip(gl_frames, frames))
    record_property("max_diff_mouth_frame", worst)
    record_property("tie_pixels_over_bound", ties)
    record_property("share_over_bound", share)
    print(f"\n{view}px, closed lips {closed_lips}: mouth frames at most {worst} apart away from "
          f"ties, {ties} tie pixels over {BOUND} in {len(PHOTO_POSES)} frames, a share of "
          f"{share:.1e} over {BOUND}; whole frames: at most {over} pixels over {BOUND}")
    if view == 512:
        assert worst <= BOUND
        assert over <= 4 * ties
    else:
        assert share <= MIPMAP_SHARE_OVER_BOUND
    # The comparison is not of a stuck frame: CUDA's open mouths are as many different
    # pictures as GL's (37 of the 45 at 512 px on llvmpipe: some visemes share a shape).
    opened = lambda frames: {m.tobytes() for m, pose in zip(frames, PHOTO_POSES) if pose.openness > 0}  # noqa: E731
    assert len(opened(mouths)) == len(opened(gl_mouths)) > len(OVR_VISEMES)
    # Host copies: the rig's records, basis, statics and two triangle lists, once; GL
    # gets the eye records only in the blinking fifth of the frames.
    assert copies == 5
    assert uploads == sum(1 for i in range(len(PHOTO_POSES)) if i % 5 == 4)


def test_the_renderer_names_why_it_cannot_run():
    assert cuda_unavailable() is None
    assert os.environ["PYOPENGL_PLATFORM"] == "egl"
    assert b"NVIDIA" in GL.glGetString(GL.GL_RENDERER)


@pytest.mark.parametrize("kind", ["sprite", "photo"])
def test_the_start_up_timing_picks_a_path_and_the_status_names_it(kind, record_property):
    """The app's start on this GPU with the settings' "auto": both paths timed on the rig
    in the output's own context, the one with the lower P99 made the output's renderer,
    and the status's words name it with both times. At 4× the pixels, timed again; asked
    for CUDA by name, CUDA with no timing."""
    side = 1024
    TARGET.resize(side, side)
    TARGET.make_current()
    rig = drawn_rig(512) if kind == "sprite" else drawn_portrait(size=side)
    picker = MouthPathPicker("auto")
    renderer = picker.made(rig, (0.0, 0.0, 0.0, 0.0), (side, side), TARGET)
    [times] = picker.measured(rig)
    chosen = choose("auto", None, times)
    print(f"\n{kind} at {side} px: OpenGL {times.opengl}, CUDA {times.cuda}; {picker.summary()}")
    for path in (OPENGL, CUDA):
        record_property(f"{path}_p50_ms", getattr(times, path).p50_ms)
        record_property(f"{path}_p99_ms", getattr(times, path).p99_ms)
    assert times.frames == MEASURED_FRAMES and times.size == (side, side)
    assert all(0 < t.p50_ms <= t.p99_ms for t in (times.opengl, times.cuda))
    assert not chosen.warning and picker.warnings() == []
    assert type(renderer) is renderer_type(rig, chosen.path)
    other = CUDA if chosen.path == OPENGL else OPENGL
    assert re.fullmatch(rf"mouth frames by {NAMES[chosen.path]}: \d+\.\d\d ms P99 against "
                        rf"{NAMES[other]}'s \d+\.\d\d ms for this rig at {side} px", picker.summary())
    # The chosen renderer draws the avatar.
    TARGET.bind()
    renderer.draw(MouthPose(5, 9, 0.5, 1.0), 0.0, 0.0)
    assert (renderer.read_pixels()[..., 3] > 0).sum() > 1000
    renderer.resize(side // 2, side // 2)
    renderer = picker.resized(renderer, rig, (side // 2, side // 2), TARGET)
    assert [t.size for t in picker.measured(rig)] == [(side, side), (side // 2, side // 2)]
    renderer.release()
    forced = MouthPathPicker("cuda")
    renderer = forced.made(rig, (0.0, 0.0, 0.0, 0.0), (side, side), TARGET)
    assert type(renderer) is renderer_type(rig, CUDA) and forced.measured(rig) == []
    assert forced.summary() == "mouth frames by CUDA, as the settings ask"
    renderer.release()
