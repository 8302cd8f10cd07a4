"""A current OpenGL 3.3 core context with an RGBA8 framebuffer and no window: for
tests, benchmarks, the frame feed and video export, which render frames that nobody
watches live.

offscreen_target() gives the one this process draws through: EGL's where PyOpenGL goes
through EGL (render/gl/egl_target.py: `render`, `--headless`), else Qt's, which makes
the context (QOffscreenSurface + QOpenGLContext) so that the same GL the avatar view gets
is used. For Qt's a QGuiApplication (or QApplication) must exist, and on X11 it needs a
display: Qt's offscreen platform has no GL of its own.
"""

from __future__ import annotations

import os

import numpy as np
from OpenGL import GL

MAX_SIZE = 8192


class OffscreenError(RuntimeError):
    """No offscreen GL target could be made; the message says why, for the user."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class FramebufferTarget:
    """A width×height RGBA8 framebuffer of our own in the current context: what an
    offscreen target draws into, whichever window system made the context (Qt here,
    EGL in render/gl/egl_target.py). Subclasses make the context current, then call
    _make_framebuffer, and define make_current() (make the context current again, after
    another context was, and bind the target) and close() (delete the framebuffer and the
    context; safe to call twice); `platform` names the window system that made the context, and
    `renderer` is the context's GL_RENDERER.

    Use as a context manager, or call close(). Renderers draw into whatever framebuffer
    is bound; bind() binds this one again after they rendered to their own."""

    platform: str
    renderer: str

    @property
    def description(self) -> str:
        """What draws the frames, for the user: "llvmpipe (...) (Mesa's EGL ...)"."""
        return f"{self.renderer} ({self.platform})"

    def _make_framebuffer(self, width: int, height: int) -> None:
        self.renderer = GL.glGetString(GL.GL_RENDERER).decode(errors="replace")
        self.fbo = int(GL.glGenFramebuffers(1))
        self._rbo = int(GL.glGenRenderbuffers(1))
        self.width = self.height = 0
        self.resize(width, height)

    def _delete_framebuffer(self) -> None:
        GL.glDeleteFramebuffers(1, [self.fbo])
        GL.glDeleteRenderbuffers(1, [self._rbo])

    def bind(self) -> None:
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        GL.glViewport(0, 0, self.width, self.height)

    def resize(self, width: int, height: int) -> None:
        """Reallocate the framebuffer at a new size (contents undefined) and bind it."""
        _check_size(width, height)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, self._rbo)
        GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, GL.GL_RGBA8, width, height)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        GL.glFramebufferRenderbuffer(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0,
                                     GL.GL_RENDERBUFFER, self._rbo)
        status = GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER)
        if status != GL.GL_FRAMEBUFFER_COMPLETE:
            raise OffscreenError(f"The GL driver refused a {width}×{height} RGBA8 framebuffer "
                                 f"(status 0x{int(status):x}).")
        self.width, self.height = width, height
        GL.glViewport(0, 0, width, height)

    def read_pixels(self, out: np.ndarray | None = None) -> np.ndarray:
        """The framebuffer as H×W×4 uint8 RGBA, top row first. With `out` (uint8
        H×W×4, C-contiguous) the pixels land there and nothing is allocated per call
        except PyOpenGL's own buffer."""
        h, w = self.height, self.width
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self.fbo)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        data = GL.glReadPixels(0, 0, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE)
        flipped = np.frombuffer(data, dtype=np.uint8).reshape(h, w, 4)[::-1]
        if out is None:
            return flipped.copy()
        if out.shape != (h, w, 4) or out.dtype != np.uint8:
            raise ValueError(f"out is {out.dtype} {out.shape}; expected uint8 {(h, w, 4)}")
        np.copyto(out, flipped)
        return out

    def __enter__(self) -> FramebufferTarget:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ScratchTarget(FramebufferTarget):
    """A width×height framebuffer of our own in whatever context is current (a window's,
    a feed's), for frames nobody sees: they leave the context's own framebuffer as it
    was. close() deletes it and binds again the framebuffer and viewport bound before."""

    platform = "the current context"

    def __init__(self, width: int, height: int) -> None:
        self._bound = int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING))
        self._viewport = [int(v) for v in GL.glGetIntegerv(GL.GL_VIEWPORT)]
        self._make_framebuffer(width, height)

    def make_current(self) -> None:
        self.bind()

    def close(self) -> None:
        if self.fbo:
            self._delete_framebuffer()
            self.fbo = 0
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self._bound)
            GL.glViewport(*self._viewport)


def offscreen_target(width: int, height: int) -> FramebufferTarget:
    """The offscreen target of this process's window system: EglTarget where PyOpenGL
    was bound to EGL (gl_platform.use_egl()), else Qt's OffscreenTarget."""
    if os.environ.get("PYOPENGL_PLATFORM") == "egl":
        # Imported here: egl_target builds on this module, and its EGL bindings are
        # only usable in a process whose PyOpenGL goes through EGL.
        from render.gl.egl_target import EglTarget

        return EglTarget(width, height)
    return OffscreenTarget(width, height)


class OffscreenTarget(FramebufferTarget):
    """Makes a 3.3 core context current, through Qt, with a width×height RGBA8
    framebuffer bound."""

    def __init__(self, width: int, height: int) -> None:
        # Qt is imported here, not with the module: EGL's target builds on this module
        # and needs no Qt, so it runs where PySide6 is not installed (the GPU test machine).
        from PySide6.QtCore import QCoreApplication
        from PySide6.QtGui import (
            QGuiApplication,
            QOffscreenSurface,
            QOpenGLContext,
            QSurfaceFormat,
        )

        _check_size(width, height)
        if not isinstance(QCoreApplication.instance(), QGuiApplication):
            raise OffscreenError("Offscreen rendering needs a QGuiApplication or QApplication; "
                                 "create one before the OffscreenTarget.")
        fmt = QSurfaceFormat()
        fmt.setVersion(3, 3)
        fmt.setProfile(QSurfaceFormat.OpenGLContextProfile.CoreProfile)
        self._surface = QOffscreenSurface()
        self._surface.setFormat(fmt)
        self._surface.create()
        self._context = QOpenGLContext()
        self._context.setFormat(fmt)
        if not self._context.create() or not self._context.makeCurrent(self._surface):
            platform = QGuiApplication.platformName()
            display = os.environ.get("DISPLAY") or "not set"
            self._surface.destroy()
            raise OffscreenError(
                f"No OpenGL 3.3 context could be made (Qt platform {platform!r}, DISPLAY {display}). "
                "Qt's OpenGL needs an X server or Wayland display with OpenGL; without one, "
                "`render` and `--headless` draw through EGL.")
        got = self._context.format()
        if (got.majorVersion(), got.minorVersion()) < (3, 3):
            self._release_context()
            raise OffscreenError(f"The OpenGL driver offers version {got.majorVersion()}."
                                 f"{got.minorVersion()}; Lipsync Studio needs 3.3 or newer.")
        self.platform = f"Qt's OpenGL on {QGuiApplication.platformName()}"
        self._make_framebuffer(width, height)

    def make_current(self) -> None:
        """Make the context current again (after another context was) and bind the target."""
        self._context.makeCurrent(self._surface)
        self.bind()

    def close(self) -> None:
        """Delete the framebuffer and the context. Safe to call twice."""
        if self._context is None:
            return
        self._context.makeCurrent(self._surface)
        self._delete_framebuffer()
        self._release_context()

    def _release_context(self) -> None:
        self._context.doneCurrent()
        self._context = None
        self._surface.destroy()


# GL_RENDERER of Mesa's CPU rasterisers and of the other systems' software fallbacks.
_CPU_RENDERERS = ("llvmpipe", "softpipe", "swrast", "software")


def gl_renderer() -> str:
    """GL_RENDERER of the OpenGL this process gets, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)".
    Raises OffscreenError when no context can be made."""
    with OffscreenTarget(1, 1) as target:
        return target.renderer


def renders_on_cpu(renderer: str) -> bool:
    """Whether a GL_RENDERER name is a software rasteriser: then every drawn pixel costs
    the same cores the voice and the microphone need."""
    name = renderer.lower()
    return any(cpu in name for cpu in _CPU_RENDERERS)


def _check_size(width: int, height: int) -> None:
    for n in (width, height):
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= MAX_SIZE:
            raise ValueError(f"offscreen size must be whole pixels, 1 to {MAX_SIZE}, "
                             f"not {width!r}×{height!r}")
