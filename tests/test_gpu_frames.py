"""Sprite frames made by CUDA (render/gpu/cuda_sprite_renderer.py) against the GL
shader path on the same GPU: every viseme pair, blinks, breathing and fades, within
2/255 of each other, and no host copy per frame. Needs an NVIDIA GPU with CUDA-GL
interop (the H200 test machine, through EGL); CI has none and skips, saying so."""

import os

import numpy as np
import pytest

from render.gl.gl_platform import use_egl

if not use_egl():
    pytest.skip("this test process already bound OpenGL to another window system; the "
                "CUDA frames need EGL on the NVIDIA driver (run this file on its own)",
                allow_module_level=True)

from OpenGL import GL  # noqa: E402

from pipeline.core.frames import MouthPose  # noqa: E402
from pipeline.core.visemes import OVR_VISEMES  # noqa: E402
from render.gl.egl_target import EglTarget  # noqa: E402
from render.gl.offscreen import OffscreenError  # noqa: E402
from render.gl.sprite_renderer import GLRenderer  # noqa: E402
from tests.harness.drawn_rig import drawn_rig  # noqa: E402

try:
    TARGET = EglTarget(512, 384)
except OffscreenError as exc:
    pytest.skip(f"no EGL context here: {exc}", allow_module_level=True)

from render.gpu.cuda_sprite_renderer import CudaSpriteRenderer, cuda_unavailable  # noqa: E402

if (reason := cuda_unavailable()) is not None:
    TARGET.close()
    pytest.skip(f"no CUDA frames here: {reason} (CI has no GPU; the H200 runs this)",
                allow_module_level=True)

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
    gl, _ = _frames(GLRenderer, size, rig)
    cuda, copies = _frames(CudaSpriteRenderer, size, rig)
    worst = max(int(np.abs(a - b).max()) for a, b in zip(gl, cuda))
    assert worst <= BOUND
    # Poses that show other drawings (or blinks, breaths, fades) give other frames, and
    # only those: the comparison is not of empty or stuck frames.
    drawing = [rig.viseme_to_mouth[v] for v in OVR_VISEMES]
    shown = {(drawing[pose.viseme_a], drawing[pose.viseme_b] if pose.mix else None, blink,
              breath, opacity) for pose, blink, breath, opacity in POSES}
    assert len({frame.tobytes() for frame in cuda}) == len(shown)
    # Host copies: one per rig image at set_rig, none per frame.
    assert copies == 3 + len(rig.mouths)


def test_the_renderer_names_why_it_cannot_run():
    assert cuda_unavailable() is None
    assert os.environ["PYOPENGL_PLATFORM"] == "egl"
    assert b"NVIDIA" in GL.glGetString(GL.GL_RENDERER)
