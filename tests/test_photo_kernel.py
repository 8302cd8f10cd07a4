"""The CUDA photo mouth-frame kernel's rasterisation and shading, checked where no GPU
is: shaders/photo_mouth.cu itself, built for the CPU (tests/harness/kernel_on_cpu.py),
against PhotoRenderer's GL mouth frames on Mesa's llvmpipe, for every viseme shut, open
and mixed, with the photo's teeth and with drawn ones. What the CPU cannot run — CUDA-GL
interop, the texture unit's sampling and mipmaps, the launches — is
tests/test_gpu_frames.py's, on the H200."""

from __future__ import annotations

import numpy as np
import pytest
from OpenGL import GL

from tests.harness.drawn_portrait import COMPARED_POSES, drawn_portrait, near_opening_edges

pytestmark = pytest.mark.display

# Both round to 8 bits; GL on llvmpipe samples with 8-bit filter weights, the CPU kernel
# with float ones: 1 level apart at 512 px, 2 at 1024 px (measured on llvmpipe), away
# from the ties near_opening_edges marks. 2 is the bound for GPU frames.
BOUND = 2


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    from tests.harness.kernel_on_cpu import build

    return build(tmp_path_factory.mktemp("kernel"))


@pytest.mark.parametrize("closed_lips, size", [(False, 512), (True, 512), (False, 1024), (True, 1024)],
                         ids=["photo teeth", "drawn teeth", "photo teeth, 1024 px", "drawn teeth, 1024 px"])
def test_the_kernel_draws_the_gl_mouth_frames(qt_app, kernel, closed_lips, size, record_property):
    from render.gl.offscreen import OffscreenTarget
    from render.gl.photo_renderer import PhotoRenderer
    from tests.harness.kernel_on_cpu import CpuMouthFrames

    rig = drawn_portrait(closed_lips, size)
    with OffscreenTarget(size, size):
        renderer = PhotoRenderer()
        renderer.initialize()
        renderer.set_rig(rig)
        renderer.resize(size, size)
        still, frame_size = renderer.read_mouth_frame(), renderer.mouth_size
        snap = float(1 << int(GL.glGetIntegerv(GL.GL_SUBPIXEL_BITS)))
        cpu = CpuMouthFrames(kernel, rig, frame_size, still, snap)
        gl_frames, cpu_frames = [], []
        for pose in COMPARED_POSES:
            renderer.draw(pose, 0.0, 0.0)
            gl_frames.append(renderer.read_mouth_frame().astype(np.int16))
            cpu_frames.append(cpu.draw(pose).astype(np.int16))
        renderer.release()
    worst, ties = 0, 0
    for pose, a, b in zip(COMPARED_POSES, gl_frames, cpu_frames):
        diff = np.abs(a - b).max(axis=2)
        near = near_opening_edges(rig, pose, frame_size)
        worst = max(worst, int(diff[~near].max()))
        ties += int((diff[near] > BOUND).sum())
    record_property("max_diff", worst)
    record_property("tie_pixels_over_bound", ties)
    print(f"\nCPU kernel against GL, {size} px, closed lips {closed_lips}: at most {worst} apart; "
          f"{ties} pixels over {BOUND} at ties on the opening's edges in {len(COMPARED_POSES)} frames")
    assert worst <= BOUND
    # Not a comparison of stills: every open pose moved the mouth, and the kernel's open
    # mouths are as many different pictures as GL's.
    assert all((frame != still).any() for frame, pose in zip(cpu_frames, COMPARED_POSES) if pose.openness)
    opened = lambda frames: {f.tobytes() for f, pose in zip(frames, COMPARED_POSES) if pose.openness}  # noqa: E731
    assert len(opened(cpu_frames)) == len(opened(gl_frames)) > 15


def test_the_parameter_record_is_laid_out_as_the_kernel_reads_it(kernel):
    from render.gpu.cuda_photo_renderer import PARAMS

    assert kernel.params_size() == PARAMS.itemsize == 152


def test_frames_shown_smaller_are_refused_on_the_cpu(kernel):
    from tests.harness.kernel_on_cpu import CpuMouthFrames

    rig = drawn_portrait()
    with pytest.raises(ValueError, match="full size"):
        CpuMouthFrames(kernel, rig, (10, 10), np.zeros((10, 10, 4), np.uint8), 256.0)
