"""A current OpenGL 3.3 core context with an RGBA8 framebuffer and no display server:
EGL on a GPU's device platform (NVIDIA's, with no X), else on Mesa's surfaceless
platform (llvmpipe, the CPU), for `render` and `--headless`.

The same framebuffer as OffscreenTarget (render/gl/offscreen.py FramebufferTarget) in a
context EGL makes, so the frame feed and the video export draw into either. PyOpenGL
binds its GL entry points to one window system per process, chosen when OpenGL is first
imported: PYOPENGL_PLATFORM=egl must be set before that (render/gl/gl_platform.py's
use_egl() does it).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

from render.gl.gl_platform import INSTALL_HINT
from render.gl.offscreen import (
    FramebufferTarget,
    OffscreenError,
    _check_size,
    renders_on_cpu,
)

# Tokens PyOpenGL 3.1 has no names for: EGL_MESA_platform_surfaceless's platform, and
# EGL_KHR_create_context's version and profile attributes.
EGL_PLATFORM_SURFACELESS_MESA = 0x31DD
EGL_CONTEXT_MAJOR_VERSION, EGL_CONTEXT_MINOR_VERSION = 0x3098, 0x30FB
EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT = 0x30FD, 0x1

DEVICE_PLATFORM = "EGL device platform"
# Mesa's EGL_MESA_platform_surfaceless; NVIDIA's EGL offers it too (the H200 drew on it).
SURFACELESS_PLATFORM = "EGL surfaceless platform"
# The most devices asked of eglQueryDevicesEXT: more GPUs than any host we meet.
MAX_DEVICES = 16



class EglTarget(FramebufferTarget):
    """Makes a 3.3 core EGL context current with a width×height RGBA8 framebuffer bound,
    on the first GPU EGL lists that gives one, else on Mesa's surfaceless platform.

    `platform` says which (DEVICE_PLATFORM or SURFACELESS_PLATFORM), `renderer` the GL
    renderer, `skipped` why each GPU device not used was passed over. OffscreenError,
    its message one line that says what to install, where no EGL display gives a context."""

    def __init__(self, width: int, height: int) -> None:
        _check_size(width, height)
        from OpenGL import EGL

        self._egl = EGL
        self._context = None
        self.skipped: list[str] = []
        for platform_token, native, platform, name in _displays(EGL):
            problem = self._open(platform_token, native)
            if problem is None:
                self.platform = platform
                break
            self.skipped.append(f"{name}: {problem}")
        else:
            tried = "; ".join(self.skipped) or "EGL offers neither a device nor Mesa's surfaceless platform"
            raise OffscreenError(f"No OpenGL through EGL here ({tried}): {INSTALL_HINT}.")
        self._make_framebuffer(width, height)

    @property
    def description(self) -> str:
        if not renders_on_cpu(self.renderer):
            return super().description
        why = "; ".join(self.skipped) or "EGL lists no GPU device"
        return f"{self.renderer} ({self.platform}; on the CPU: {why})"

    def _open(self, platform_token: int, native) -> str | None:
        """Make a context current on the platform's display; None when done, else why
        not. A display that fails stays initialised: eglTerminate is not
        reference-counted, and another target of this process may hold a context on it."""
        from OpenGL.EGL.EXT.platform_base import eglGetPlatformDisplayEXT

        EGL = self._egl
        display = surface = context = None
        try:
            problem = None
            display = eglGetPlatformDisplayEXT(platform_token, native, None)
            major, minor = EGL.EGLint(), EGL.EGLint()
            # PyOpenGL raises EGLError on an EGL error; results are checked as well, for
            # a process that turned PyOpenGL's error checking off.
            if not display or not EGL.eglInitialize(display, ctypes.pointer(major),
                                                    ctypes.pointer(minor)):
                return "no display"
            attribs = [EGL.EGL_SURFACE_TYPE, EGL.EGL_PBUFFER_BIT, EGL.EGL_RED_SIZE, 8,
                       EGL.EGL_GREEN_SIZE, 8, EGL.EGL_BLUE_SIZE, 8, EGL.EGL_ALPHA_SIZE, 8,
                       EGL.EGL_RENDERABLE_TYPE, EGL.EGL_OPENGL_BIT, EGL.EGL_NONE]
            config, count = EGL.EGLConfig(), EGL.EGLint()
            EGL.eglChooseConfig(display, (EGL.EGLint * len(attribs))(*attribs),
                                ctypes.pointer(config), 1, ctypes.pointer(count))
            if not count.value:
                return "no RGBA8 OpenGL configuration"
            # A 1×1 pbuffer only to have something current: drawing goes into our own FBO.
            surface = EGL.eglCreatePbufferSurface(
                display, config, (EGL.EGLint * 5)(EGL.EGL_WIDTH, 1, EGL.EGL_HEIGHT, 1, EGL.EGL_NONE))
            EGL.eglBindAPI(EGL.EGL_OPENGL_API)
            # 3.3 core at least: NVIDIA grants a newer core version that runs 3.3 code.
            context = EGL.eglCreateContext(display, config, EGL.EGL_NO_CONTEXT, (EGL.EGLint * 7)(
                EGL_CONTEXT_MAJOR_VERSION, 3, EGL_CONTEXT_MINOR_VERSION, 3,
                EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL.EGL_NONE))
            if not surface or not context or not EGL.eglMakeCurrent(display, surface, surface,
                                                                     context):
                problem = "no OpenGL 3.3 core context"
        except EGL.EGLError as exc:
            problem = f"{getattr(exc.baseOperation, '__name__', 'EGL')} failed ({exc.err!r})"
        if problem:
            if context:
                EGL.eglDestroyContext(display, context)
            if surface:
                EGL.eglDestroySurface(display, surface)
            return problem
        self._display, self._surface, self._context = display, surface, context
        return None

    def make_current(self) -> None:
        self._egl.eglMakeCurrent(self._display, self._surface, self._surface, self._context)
        self.bind()

    def close(self) -> None:
        """Delete the framebuffer and the context. Safe to call twice."""
        if self._context is None:
            return
        EGL = self._egl
        self.make_current()
        self._delete_framebuffer()
        EGL.eglMakeCurrent(self._display, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)
        EGL.eglDestroyContext(self._display, self._context)
        EGL.eglDestroySurface(self._display, self._surface)
        self._context = None


def lists_devices(client_extensions: list[str]) -> bool:
    """Whether EGL's client extensions let it list its devices and open a display on one.
    EGL_EXT_device_base is EGL_EXT_device_enumeration and _query in one, and NVIDIA's
    libEGL names only it (on the H200: "... EGL_EXT_device_base ... EGL_EXT_platform_device
    ..."), so asking for _enumeration alone never tried NVIDIA's device platform."""
    extensions = set(client_extensions)
    return ("EGL_EXT_platform_device" in extensions
            and bool({"EGL_EXT_device_enumeration", "EGL_EXT_device_base"} & extensions))


def _displays(EGL) -> Iterator[tuple[int, object, str, str]]:
    """(EGL platform, its native display, platform, name) to try, best first: each GPU device EGL lists, then
    Mesa's surfaceless platform. Mesa also lists its CPU rasteriser as a device
    (EGL_MESA_device_software); that one is the surfaceless platform's llvmpipe under
    another name, left to the fallback so that the device platform always means a GPU."""
    client = (EGL.eglQueryString(EGL.EGL_NO_DISPLAY, EGL.EGL_EXTENSIONS) or b"").decode().split()
    if "EGL_EXT_platform_base" not in client:
        return  # neither platform can be asked for (a libEGL with no vendor library)
    if lists_devices(client):
        from OpenGL.EGL.EXT.device_base import eglQueryDevicesEXT, eglQueryDeviceStringEXT
        from OpenGL.EGL.EXT.platform_device import EGL_PLATFORM_DEVICE_EXT

        devices, count = (EGL.EGLDeviceEXT * MAX_DEVICES)(), EGL.EGLint()
        eglQueryDevicesEXT(MAX_DEVICES, devices, ctypes.pointer(count))
        for index in range(count.value):
            extensions = (eglQueryDeviceStringEXT(devices[index], EGL.EGL_EXTENSIONS) or b"").split()
            if b"EGL_MESA_device_software" in extensions:
                continue
            yield EGL_PLATFORM_DEVICE_EXT, devices[index], DEVICE_PLATFORM, f"EGL device {index}"
    if "EGL_MESA_platform_surfaceless" in client:
        yield EGL_PLATFORM_SURFACELESS_MESA, None, SURFACELESS_PLATFORM, "Mesa's surfaceless platform"
