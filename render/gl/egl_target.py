"""A current OpenGL 3.3 core context with an RGBA8 framebuffer and no display server:
EGL on Mesa's surfaceless platform (or a GPU's device platform), for `--headless` on a
machine with no X or Wayland session.

The same interface as OffscreenTarget (make_current, bind, resize, close, width, height),
so FrameFeed draws into either. PyOpenGL binds its GL entry points to one window system
per process, chosen when OpenGL is first imported: PYOPENGL_PLATFORM=egl must be set
before that (render/gl/gl_platform.py's use_egl() does it).
"""

from __future__ import annotations

import ctypes

from render.gl.offscreen import OffscreenError, _check_size


class EglTarget:
    """Makes a 3.3 core EGL context current with a width×height RGBA8 framebuffer bound."""

    def __init__(self, width: int, height: int) -> None:
        _check_size(width, height)
        from OpenGL import EGL, GL

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
        self._gl = GL
        self.fbo = int(GL.glGenFramebuffers(1))
        self._rbo = int(GL.glGenRenderbuffers(1))
        self.width = self.height = 0
        self.resize(width, height)

    def make_current(self) -> None:
        self._egl.eglMakeCurrent(self._display, self._surface, self._surface, self._context)
        self.bind()

    def bind(self) -> None:
        self._gl.glBindFramebuffer(self._gl.GL_FRAMEBUFFER, self.fbo)
        self._gl.glViewport(0, 0, self.width, self.height)

    def resize(self, width: int, height: int) -> None:
        GL = self._gl
        _check_size(width, height)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, self._rbo)
        GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, GL.GL_RGBA8, width, height)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        GL.glFramebufferRenderbuffer(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0,
                                     GL.GL_RENDERBUFFER, self._rbo)
        if GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER) != GL.GL_FRAMEBUFFER_COMPLETE:
            raise OffscreenError(f"The GL driver refused a {width}×{height} RGBA8 framebuffer.")
        self.width, self.height = width, height
        GL.glViewport(0, 0, width, height)

    def close(self) -> None:
        """Delete the framebuffer and the context. Safe to call twice."""
        if self._context is None:
            return
        EGL, GL = self._egl, self._gl
        self.make_current()
        GL.glDeleteFramebuffers(1, [self.fbo])
        GL.glDeleteRenderbuffers(1, [self._rbo])
        EGL.eglMakeCurrent(self._display, EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)
        EGL.eglDestroyContext(self._display, self._context)
        EGL.eglDestroySurface(self._display, self._surface)
        self._context = None
