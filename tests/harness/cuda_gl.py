"""The GPU test modules' start: an EGL context on the NVIDIA driver where CUDA-GL interop
works, or the calling module skipped, saying why (CI has no GPU; the H200 runs them).
Call it before anything imports OpenGL: EGL must be PyOpenGL's platform from the start,
so each GPU test file runs on its own."""

from __future__ import annotations

import pytest

from render.gl.gl_platform import use_egl


def cuda_gl_target(width: int, height: int):
    """A current render/gl/egl_target.py EglTarget of width×height, CUDA frames possible
    in it; otherwise the module calling this (at import) is skipped."""
    if not use_egl():
        pytest.skip("this test process already bound OpenGL to another window system; the "
                    "CUDA frames need EGL on the NVIDIA driver (run this file on its own)",
                    allow_module_level=True)
    from render.gl.egl_target import EglTarget
    from render.gl.offscreen import OffscreenError

    try:
        target = EglTarget(width, height)
    except OffscreenError as exc:
        pytest.skip(f"no EGL context here: {exc}", allow_module_level=True)
    from render.gpu.cuda_sprite_renderer import cuda_unavailable

    if (reason := cuda_unavailable()) is not None:
        target.close()
        pytest.skip(f"no CUDA frames here: {reason} (CI has no GPU; the H200 runs this)",
                    allow_module_level=True)
    return target
