"""The avatar on screen: a native GL window of its own, drawing the frame the presenter
gives it at each display tick.

The presenter (render/timing/presenter.py) decides what each tick shows; this output
only paces it with the window's buffer swaps and a timer, and draws. The avatar is a
QOpenGLWindow inside a window container rather than a QOpenGLWidget: a widget's frame is
drawn into a texture that Qt then composes with the rest of the window on every frame.
With software GL (llvmpipe, 2 cores) at 60 fps that cost the idle app 1.27 cores, and it
held only 52.6 fps; as a window 0.53 cores at 59.9 fps, 8.8 ms of CPU a frame instead of
24 (bench/results/app_cpu_vm_2core_epyc.json, medians of 3 interleaved rounds). A native
window is swapped on its own and nothing else is redrawn with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import shiboken6
from OpenGL import GL
from PySide6.QtCore import QRect, Qt, QTimer
from PySide6.QtGui import QImage, QPainter, QRegion, QSurfaceFormat, QWindow
from PySide6.QtOpenGL import QOpenGLWindow
from PySide6.QtWidgets import QWidget

from render.gl.sprite_renderer import GLRenderer, read_framebuffer
from render.rigs.loader import AvatarRig, renderer_for
from render.timing.frame_producer import MediaClock, PoseSource
from render.timing.presenter import (
    LATE_HELD,
    LATE_INTERPOLATED,
    LOG_DTYPE,
    PRESENTED,
    REST,
    AvatarFrame,
    Pacing,
    Presenter,
)

# The statuses and the log's rows are the presenter's; the app reads them from here.
__all__ = ["AvatarView", "LATE_HELD", "LATE_INTERPOLATED", "LOG_DTYPE", "PRESENTED"]


class _Surface(QOpenGLWindow):
    """The avatar's native window; its GL callbacks are the view's."""

    def __init__(self, view: AvatarView, parent) -> None:
        super().__init__(QOpenGLWindow.UpdateBehavior.NoPartialUpdate, parent)
        fmt = QSurfaceFormat()
        fmt.setVersion(3, 3)
        fmt.setProfile(QSurfaceFormat.OpenGLContextProfile.CoreProfile)
        fmt.setAlphaBufferSize(8)
        fmt.setSwapInterval(1)
        self.setFormat(fmt)
        # Clicks, drops and focus belong to the widgets around it, as with a widget: the
        # text field keeps the keyboard when the avatar is clicked.
        self.setFlag(Qt.WindowType.WindowDoesNotAcceptFocus)
        self.setFlag(Qt.WindowType.WindowTransparentForInput)
        self._view = view

    def initializeGL(self) -> None:
        self._view._initialize_gl(self)

    def resizeGL(self, width: int, height: int) -> None:
        ratio = self.devicePixelRatio()
        self._view.renderer.resize(round(width * ratio), round(height * ratio))

    def paintGL(self) -> None:
        self._view._paint_gl(self)


class AvatarView(QWidget):
    """Renders a rig, its mouth pulled from the presenter's frame slots on the display tick.

    Child widgets of the view (the app's landmark overlay) are painted over the avatar
    inside its GL window: the native window would hide them otherwise."""

    def __init__(self, parent=None, *, fps: float = 60.0,
                 clear_color: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
                 slot_count: int = 30, lookahead: float = 0.2, seed: int = 0,
                 log_rows: int = 36_000, now: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parent)
        self.presenter = Presenter(fps, slot_count=slot_count, lookahead=lookahead, seed=seed,
                                   log_rows=log_rows, now=now)
        self._now = now
        self.renderer = GLRenderer(clear_color)
        self._rig: AvatarRig | None = None
        self._rig_pending = False
        self._gl_ready = False
        self._frame: AvatarFrame | None = None
        self._draw_seconds = np.zeros(600, dtype=np.float64)
        self._draws = 0
        # The container takes the window and deletes it with itself, but PySide (6.11)
        # leaves a window made in Python owned by Python too, and the second delete
        # crashed the process at exit. Made as another window's child, it is C++'s from
        # the start; the container re-parents it at once, and the stand-in can go.
        stand_in = QWindow()
        self._surface = _Surface(self, stand_in)
        self._container = QWidget.createWindowContainer(self._surface, self)
        self._container.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._on_timer)
        self._surface.frameSwapped.connect(self._on_swapped)

    # The presenter's parts, where tests and benchmarks look at them.
    @property
    def period(self) -> float:
        return self.presenter.period

    @property
    def slots(self):
        return self.presenter.slots

    @property
    def clock(self):
        return self.presenter.clock

    # -- public API ---------------------------------------------------------------

    def set_rig(self, rig: AvatarRig) -> None:
        """Show `rig` (a sprite or a photo rig); its images are uploaded now if GL is up,
        else at initialisation."""
        self._rig = rig
        self._rig_pending = True
        if self._gl_ready:
            self._surface.makeCurrent()
            self._upload_rig()
            self._surface.doneCurrent()
            self._surface.update()

    def set_sources(self, pose_source: PoseSource | None,
                    media_time_at: MediaClock | None,
                    source_version: Callable[[], int] | None = None) -> None:
        """Pull frames made by `pose_source` at the times `media_time_at` says are heard.
        `source_version` changes whenever the source's answers may have changed, so frames
        made ahead are made again. None for a source or clock leaves the avatar idle
        (its last mouth, blinking, breathing)."""
        self.presenter.set_sources(pose_source, media_time_at, source_version)

    def set_idle_motion(self, blinking: bool = True, breathing: bool = True) -> None:
        """Switch blinking and breathing on or off (both on by default)."""
        self.presenter.set_idle_motion(blinking, breathing)

    def set_clear_color(self, color: tuple[float, float, float, float]) -> None:
        """Background as straight RGBA in 0..1; alpha 0 is transparent (grab() keeps the
        alpha)."""
        self.renderer.clear_color = color
        self._surface.update()

    def stats(self) -> dict:
        """The presenter's counters and timing, and this output's draw times."""
        draws = self._draw_seconds[: min(self._draws, len(self._draw_seconds))] * 1e3
        draw_p50, draw_p99 = np.percentile(draws, (50, 99)) if len(draws) else (0.0, 0.0)
        return {**self.presenter.stats(),
                "draw_ms": {"p50": float(draw_p50), "p99": float(draw_p99)}}

    def presentation_log(self):
        """A copy of the logged ticks, oldest first (the newest `log_rows` of them)."""
        return self.presenter.presentation_log()

    def grab(self) -> QImage:
        """A screenshot of the avatar as rendered (alpha included, overlays not); a null
        image before the window was first shown."""
        if not self._gl_ready:
            return QImage()
        surface = self._surface
        surface.makeCurrent()
        width, height = self.renderer.viewport
        # The window's own back buffer is undefined after a swap: draw the frame on
        # screen again into a framebuffer of our own and read that.
        fbo = int(GL.glGenFramebuffers(1))
        rbo = int(GL.glGenRenderbuffers(1))
        try:
            GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, rbo)
            GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, GL.GL_RGBA8, width, height)
            GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
            GL.glFramebufferRenderbuffer(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0,
                                         GL.GL_RENDERBUFFER, rbo)
            self._draw()
            pixels = read_framebuffer(width, height)
        finally:
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, surface.defaultFramebufferObject())
            GL.glDeleteFramebuffers(1, [fbo])
            GL.glDeleteRenderbuffers(1, [rbo])
            surface.doneCurrent()
        # The renderers write premultiplied alpha, as QOpenGLWidget's grab returned it.
        image = QImage(pixels.data, width, height, 4 * width,
                       QImage.Format.Format_RGBA8888_Premultiplied).copy()
        image.setDevicePixelRatio(surface.devicePixelRatio())
        return image

    def shutdown(self) -> None:
        """Stop ticking and producing; GL objects go with the context."""
        self._timer.stop()
        self.presenter.shutdown()

    # -- layout -------------------------------------------------------------------

    def resizeEvent(self, event) -> None:
        # At once, not through a layout: the window must have the view's size before the
        # next tick draws (and a grab reads) it.
        self._container.setGeometry(QRect(0, 0, self.width(), self.height()))
        super().resizeEvent(event)

    # -- GL -----------------------------------------------------------------------

    def _initialize_gl(self, surface: _Surface) -> None:
        self.renderer.initialize()
        surface.context().aboutToBeDestroyed.connect(self._release_gl)
        self._gl_ready = True
        if self._rig_pending:
            self._upload_rig()

    def _paint_gl(self, surface: _Surface) -> None:
        started = time.perf_counter()
        self._draw()
        self._draw_seconds[self._draws % len(self._draw_seconds)] = time.perf_counter() - started
        self._draws += 1
        overlays = [child for child in self.children()
                    if child is not self._container and child.isWidgetType() and child.isVisible()]
        if overlays:
            painter = QPainter(surface)
            for overlay in overlays:
                overlay.render(painter, overlay.pos(), QRegion(),
                               QWidget.RenderFlag.DrawChildren)
            painter.end()

    def _draw(self) -> None:
        frame = self._frame
        if frame is None:
            self.renderer.draw(REST, 0.0, 0.0)
        else:
            self.renderer.draw(frame.pose, frame.blink, frame.breath)

    def _upload_rig(self) -> None:
        fresh = renderer_for(self._rig, self.renderer.clear_color)
        if type(fresh) is not type(self.renderer):
            old, self.renderer = self.renderer, fresh
            old.release()
            fresh.initialize()
            fresh.resize(*old.viewport)
        self.renderer.set_rig(self._rig)
        self._rig_pending = False

    def _release_gl(self) -> None:
        if shiboken6.isValid(self._surface):
            self._surface.makeCurrent()
            self.renderer.release()
            self._surface.doneCurrent()
        # Else the window is being deleted, and its context with it: no GL call can be
        # made any more (none is current), and the context takes its objects along.
        self._gl_ready = False
        self._rig_pending = self._rig is not None

    # -- ticking ------------------------------------------------------------------

    def _on_swapped(self) -> None:
        self._follow(self.presenter.swapped(self._now()))

    def _on_timer(self) -> None:
        self._follow(self.presenter.timer_fired(self._now()))

    def _follow(self, pacing: Pacing) -> None:
        if pacing.frame is not None:
            self._frame = pacing.frame
            self._surface.update()
        if pacing.wake_in is not None:
            # Whole milliseconds only (QTimer); rounding to nearest keeps the tick centred
            # on its deadline. The prediction uses the grid time, not the tick's.
            self._timer.start(max(0, round(pacing.wake_in * 1e3)))
