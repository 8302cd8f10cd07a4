"""A current OpenGL 3.3 core context with an RGBA8 framebuffer and no display server:
EGL on Mesa's surfaceless platform (or a GPU's device platform), for `--headless` on a
machine with no X or Wayland session.

The same framebuffer as OffscreenTarget (render/gl/offscreen.py FramebufferTarget) in a
context EGL makes, so FrameFeed draws into either. PyOpenGL binds its GL entry points to one window system
per process, chosen when OpenGL is first imported: PYOPENGL_PLATFORM=egl must be set
before that (render/gl/gl_platform.py's use_egl() does it).
"""

from __future__ import annotations

import ctypes

from render.gl.offscreen import FramebufferTarget, OffscreenError, _check_size


class EglTarget(FramebufferTarget):
    """Makes a 3.3 core EGL context current with a width×height RGBA8 framebuffer bound."""

    def __init__(self, width: int, height: int) -> None:
        _check_size(width, height)
        from OpenGL import EGL

        self._egl = EGL
        display = EGL.eglGetDisplay(EGL.EGL_DEFAULT_DISPLAY)
        major, minor = EGL.EGLint(), EGL.EGLint()
        if not display or not EGL.eglInitialize(display, ctypes.pointer(major), ctypes.pointer(minor)):
            raise OffscreenError("No EGL display could be opened for rendering without a screen "
                                 "(install Mesa's EGL: libegl1 libegl-mesa0 libgl1-mesa-dri).")
        attribs = [EGL.EGL_SURFACE_TYPE, EGL.EGL_PBUFFER_BIT, EGL.EGL_RED_SIZE, 8,
                   EGL.EGL_GREEN_SIZE, 8, EGL.EGL_BLUE_SIZE, 8, EGL.EGL_ALPHA_SIZE, 8,
                   EGL.EGL_RENDERABLE_TYPE, EGL.EGL_OPENGL_BIT, EGL.EGL_NONE]
        config, count = EGL.EGLConfig(), EGL.EGLint()
        if not EGL.eglChooseConfig(display, (EGL.EGLint * len(attribs))(*attribs),
                                   ctypes.pointer(config), 1, ctypes.pointer(count)) or not count.value:
            raise OffscreenError("EGL offers no RGBA8 OpenGL configuration here.")
        # A 1×1 pbuffer only to have something current: drawing goes into our own FBO.
        self._surface = EGL.eglCreatePbufferSurface(
            display, config, (EGL.EGLint * 5)(EGL.EGL_WIDTH, 1, EGL.EGL_HEIGHT, 1, EGL.EGL_NONE))
        EGL.eglBindAPI(EGL.EGL_OPENGL_API)
        # EGL_CONTEXT_MAJOR_VERSION 3, MINOR 3, OPENGL_PROFILE_MASK core.
        context_attribs = (EGL.EGLint * 7)(0x3098, 3, 0x30FB, 3, 0x30FD, 1, EGL.EGL_NONE)
        self._context = EGL.eglCreateContext(display, config, EGL.EGL_NO_CONTEXT, context_attribs)
        if not self._context or not EGL.eglMakeCurrent(display, self._surface, self._surface,
                                                       self._context):
            EGL.eglTerminate(display)
            raise OffscreenError("EGL could not make an OpenGL 3.3 core context current.")
        self._display = display
        self._make_framebuffer(width, height)

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
