"""The offscreen GL target: a real Mesa context under Xvfb, no window."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.display


def test_clears_reads_back_top_row_first_and_resizes(qt_app):
    from OpenGL import GL

    from render.gl.offscreen import OffscreenTarget

    with OffscreenTarget(8, 6) as target:
        GL.glClearColor(1.0, 0.0, 0.0, 1.0)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        # Only the bottom row (GL's y = 0) turns green: it must come back last.
        GL.glEnable(GL.GL_SCISSOR_TEST)
        GL.glScissor(0, 0, 8, 1)
        GL.glClearColor(0.0, 1.0, 0.0, 1.0)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        GL.glDisable(GL.GL_SCISSOR_TEST)
        img = target.read_pixels()
        assert img.shape == (6, 8, 4) and img.dtype == np.uint8
        assert img[0, 0].tolist() == [255, 0, 0, 255]
        assert img[-1, 3].tolist() == [0, 255, 0, 255]
        out = np.zeros_like(img)
        assert target.read_pixels(out) is out and np.array_equal(out, img)

        target.resize(33, 17)
        GL.glClearColor(0.0, 0.0, 1.0, 0.5)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        img = target.read_pixels()
        assert img.shape == (17, 33, 4)
        assert img[8, 16].tolist() == [0, 0, 255, 128]
        with pytest.raises(ValueError, match="expected uint8"):
            target.read_pixels(np.zeros((6, 8, 4), np.uint8))
    target.close()   # twice is harmless


def test_bad_sizes_are_refused(qt_app):
    from render.gl.offscreen import OffscreenTarget

    for size in ((0, 10), (10, 9000), (2.5, 4)):
        with pytest.raises(ValueError, match="whole pixels"):
            OffscreenTarget(*size)


def test_xvfb_gl_is_named_and_known_to_render_on_the_cpu(qt_app):
    from render.gl.offscreen import gl_renderer, renders_on_cpu

    # Xvfb has no GPU: Mesa draws on the CPU there, whatever the machine has. Which
    # rasteriser that is depends on how Mesa was built (llvmpipe with LLVM, softpipe
    # without; here "llvmpipe (LLVM 15.0.6, 256 bits)"), so the name is only printed.
    name = gl_renderer()
    print(f"\nXvfb OpenGL renderer: {name}")
    assert renders_on_cpu(name), name
    for gpu in ("NVIDIA H200/PCIe/SSE2", "AMD Radeon RX 7800 XT (radeonsi, navi32, LLVM 15.0.7)",
                "Mesa Intel(R) UHD Graphics 620 (KBL GT2)", "Apple M2"):
        assert not renders_on_cpu(gpu)
    for cpu in ("softpipe", "Software Rasterizer", "Microsoft Basic Render Driver (software)"):
        assert renders_on_cpu(cpu)


def run_python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60, cwd=os.getcwd())


def test_without_an_application_or_a_display_the_error_says_so(qt_app):
    code = ("from render.gl.offscreen import OffscreenTarget, OffscreenError\n"
            "{setup}\n"
            "try:\n    OffscreenTarget(4, 4)\n"
            "except OffscreenError as e:\n    print('ERR', e.message)\n")
    env = dict(os.environ)
    no_app = run_python(code.format(setup=""), env)
    assert "ERR Offscreen rendering needs a QGuiApplication" in no_app.stdout, no_app.stderr

    env.pop("DISPLAY")
    env["QT_QPA_PLATFORM"] = "offscreen"
    no_display = run_python(code.format(
        setup="from PySide6.QtGui import QGuiApplication\napp = QGuiApplication([])"), env)
    assert "ERR No OpenGL 3.3 context could be made (Qt platform 'offscreen', DISPLAY not set)" \
        in no_display.stdout, no_display.stdout + no_display.stderr
