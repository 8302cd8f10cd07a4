"""The offscreen GL targets, no window: Qt's on a real Mesa context under Xvfb, and
EGL's (render/gl/egl_target.py) in a process of its own with no display."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.display

REPO = Path(__file__).resolve().parent.parent


def check_clears_reads_back_top_row_first_and_resizes(target) -> None:
    """On a fresh 8×6 target: clears land, rows come back top first, resize works, and
    `target` is closed (twice is harmless)."""
    from OpenGL import GL

    with target:
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
        # 128/255, not 0.5: 0.5 lies halfway between 127 and 128, which GL leaves to the
        # implementation (Mesa gives 128, NVIDIA's driver 127 on the H200).
        GL.glClearColor(0.0, 0.0, 1.0, 128 / 255)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        img = target.read_pixels()
        assert img.shape == (17, 33, 4)
        assert img[8, 16].tolist() == [0, 0, 255, 128]
        with pytest.raises(ValueError, match="expected uint8"):
            target.read_pixels(np.zeros((6, 8, 4), np.uint8))
    target.close()   # twice is harmless


def test_clears_reads_back_top_row_first_and_resizes(qt_app):
    from render.gl.offscreen import OffscreenTarget

    check_clears_reads_back_top_row_first_and_resizes(OffscreenTarget(8, 6))


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
                          text=True, timeout=60, cwd=REPO)


def no_display_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}


EGL_TARGET = """
import ctypes
from render.gl.gl_platform import use_egl
assert use_egl()
from OpenGL import EGL
from OpenGL.EGL.EXT.device_base import eglQueryDevicesEXT, eglQueryDeviceStringEXT
from render.gl.egl_target import EglTarget
from render.gl.offscreen import offscreen_target
from tests.test_offscreen import check_clears_reads_back_top_row_first_and_resizes

devices, count = (EGL.EGLDeviceEXT * 16)(), EGL.EGLint()
eglQueryDevicesEXT(16, devices, ctypes.pointer(count))
for i in range(count.value):
    extensions = eglQueryDeviceStringEXT(devices[i], EGL.EGL_EXTENSIONS) or b""
    print("device", i, extensions.decode())
target = offscreen_target(8, 6)
assert isinstance(target, EglTarget), type(target)
print("platform", target.platform)
print("renderer", target.renderer)
print("skipped", target.skipped)
print("description", target.description)
check_clears_reads_back_top_row_first_and_resizes(target)
print("drawn", "yes")
"""


def test_egl_takes_a_gpu_device_else_mesa_surfaceless_and_says_which():
    """EGL in a process of its own (PyOpenGL binds one window system per process, and
    this one's is GLX), with no display; the process lists EGL's devices itself.

    On this development machine, which has no GPU, only the fallback runs: Mesa lists its
    CPU rasteriser as an EGL device (EGL_MESA_device_software, asserted to be there, so
    the passing over is seen); it is not taken for a GPU, the target falls back to Mesa's
    surfaceless platform, names llvmpipe and says it draws on the CPU. Where EGL lists a
    GPU (the NVIDIA test machine) the same test expects the device platform and a
    renderer that is not a CPU rasteriser. Either way it draws and reads back as Qt's."""
    from render.gl.egl_target import DEVICE_PLATFORM, SURFACELESS_PLATFORM
    from render.gl.offscreen import renders_on_cpu

    result = run_python(EGL_TARGET, no_display_env())
    assert result.returncode == 0, result.stdout + result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines()
                 if not line.startswith("device"))
    devices = [line for line in result.stdout.splitlines() if line.startswith("device")]
    print(f"\nEGL devices: {devices}\nEGL target: {lines['description']}")
    gpus = [d for d in devices if "EGL_MESA_device_software" not in d]
    if gpus:
        assert lines["platform"] == DEVICE_PLATFORM
        assert not renders_on_cpu(lines["renderer"]), lines["renderer"]
        assert lines["description"] == f"{lines['renderer']} ({DEVICE_PLATFORM})"
    else:
        assert devices, "Mesa lists its software rasteriser as a device"
        assert lines["platform"] == SURFACELESS_PLATFORM
        assert renders_on_cpu(lines["renderer"]), lines["renderer"]
        assert lines["skipped"] == "[]"
        assert lines["description"] == (f"{lines['renderer']} ({SURFACELESS_PLATFORM}; "
                                        "on the CPU: EGL lists no GPU device)")
    assert lines["drawn"] == "yes"


# EGL's client extensions as the two vendors' libEGL list them (read on the H200, driver
# 580, and on this development machine, Mesa 22.3).
NVIDIA_CLIENT = ("EGL_EXT_platform_base EGL_EXT_device_base EGL_KHR_client_get_all_proc_addresses "
                 "EGL_EXT_client_extensions EGL_KHR_debug EGL_KHR_platform_x11 EGL_EXT_platform_x11 "
                 "EGL_EXT_platform_device EGL_MESA_platform_surfaceless EGL_EXT_explicit_device")
MESA_CLIENT = ("EGL_EXT_device_base EGL_EXT_device_enumeration EGL_EXT_device_query "
               "EGL_EXT_platform_base EGL_KHR_client_get_all_proc_addresses EGL_EXT_client_extensions "
               "EGL_KHR_debug EGL_EXT_platform_device EGL_EXT_platform_wayland EGL_KHR_platform_wayland "
               "EGL_EXT_platform_x11 EGL_KHR_platform_x11 EGL_EXT_platform_xcb EGL_MESA_platform_gbm "
               "EGL_KHR_platform_gbm EGL_MESA_platform_surfaceless")


def test_both_vendors_egl_lists_its_devices():
    """NVIDIA's libEGL names EGL_EXT_device_base alone, Mesa's its parts as well: either
    way the devices are listed (asking for _enumeration alone never tried NVIDIA's)."""
    from render.gl.egl_target import lists_devices

    assert lists_devices(NVIDIA_CLIENT.split()) and lists_devices(MESA_CLIENT.split())
    assert not lists_devices(NVIDIA_CLIENT.replace("EGL_EXT_device_base", "").split())
    assert not lists_devices(MESA_CLIENT.replace("EGL_EXT_platform_device", "").split())


@pytest.mark.parametrize("env, reason", [
    # libglvnd's libEGL with no vendor library to hand the calls to: no platform at all.
    ({"__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent/egl_vendor.json"},
     "EGL offers neither a device nor Mesa's surfaceless platform"),
    # Mesa whose driver cannot load: the surfaceless display fails to initialise.
    ({"GALLIUM_DRIVER": "no-such-driver"},
     "Mesa's surfaceless platform: eglInitialize failed (EGL_NOT_INITIALIZED)"),
])
def test_where_egl_gives_no_opengl_the_error_says_what_to_install(env, reason):
    code = ("from render.gl.gl_platform import use_egl\nuse_egl()\n"
            "from render.gl.egl_target import EglTarget\n"
            "from render.gl.offscreen import OffscreenError\n"
            "try:\n    EglTarget(4, 4)\n"
            "except OffscreenError as e:\n    print('ERR', e.message)\n")
    result = run_python(code, {**no_display_env(), **env})
    assert result.stdout.splitlines() == [
        f"ERR No OpenGL through EGL here ({reason}): install the GPU's OpenGL driver, or "
        "Mesa's EGL to render on the CPU (Debian/Ubuntu: libegl1 libopengl0 libegl-mesa0 "
        "libgl1-mesa-dri)."], result.stdout + result.stderr


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
