"""One on-screen output of the avatar: a native GL window with its own presenter, drawing
the frame the presenter gives it at each display tick.

The presenter (render/timing/presenter.py) decides what each tick shows; the surface only
paces it with the window's buffer swaps and a timer, and draws. The app's main window
embeds one (render/outputs/avatar_view.py); the avatar-only window for OBS is another,
top-level (render/outputs/avatar_window.py). Each pulls its own frames on its own ticks
from the same media clock, so neither waits for the other.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import shiboken6
from OpenGL import GL
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QImage, QSurfaceFormat
from PySide6.QtOpenGL import QOpenGLWindow

from render.gl.compositor import ChromaCompositor
from render.gl.sprite_renderer import SpriteGLRenderer, read_framebuffer
from render.gpu.path_picker import MouthPathPicker
from render.outputs.background import CHROMA, SOLID, Background
from render.rigs.loader import AvatarRig
from render.timing.frame_producer import MediaClock, PoseSource
from render.timing.presenter import REST, AvatarFrame, Pacing, Presenter


class AvatarSurface(QOpenGLWindow):
    """A GL window showing a rig, its frames pulled from its presenter on the display tick.

    `after_draw(painter_device)` runs after each frame is drawn, with the window current
    (the main window paints its overlays there). `frame_drawn(frame)` runs after each
    frame, with the GL context still current and the frame's pixels in the bound
    framebuffer (readback for the virtual camera and browser source hooks in there).

    `mouth_paths` (the app's one picker) chooses the renderer's mouth-frame path for the
    rig at the window's size, timing the paths in this window's context before it
    presents the rig where the choice needs it; OpenGL's without one."""

    def __init__(self, *, fps: float = 60.0, background: Background = Background(),
                 slot_count: int = 30, lookahead: float = 0.2, seed: int = 0,
                 log_rows: int = 36_000, now: Callable[[], float] = time.monotonic,
                 mouth_paths: MouthPathPicker | None = None, parent=None) -> None:
        super().__init__(QOpenGLWindow.UpdateBehavior.NoPartialUpdate, parent)
        fmt = QSurfaceFormat()
        fmt.setVersion(3, 3)
        fmt.setProfile(QSurfaceFormat.OpenGLContextProfile.CoreProfile)
        # An alpha channel in the window itself: on X11 Qt then picks a 32-bit ARGB
        # visual, which is what lets OBS's window capture keep the transparency.
        fmt.setAlphaBufferSize(8)
        # Qt's GL paint engine fills paths (caption outlines) through the stencil buffer;
        # without one it fills their bounding boxes instead.
        fmt.setStencilBufferSize(8)
        fmt.setSwapInterval(1)
        self.setFormat(fmt)
        self.presenter = Presenter(fps, slot_count=slot_count, lookahead=lookahead, seed=seed,
                                   log_rows=log_rows, now=now)
        self._now = now
        self._background = background
        self.renderer = SpriteGLRenderer(_clear_colour(background))
        self._paths = mouth_paths or MouthPathPicker()
        self._compositor = ChromaCompositor()
        self._rig: AvatarRig | None = None
        self._rig_pending = False
        self.gl_ready = False
        self._frame: AvatarFrame | None = None
        self._draw_seconds = np.zeros(600, dtype=np.float64)
        self.draws = 0
        self.after_draw: Callable[[AvatarSurface], None] | None = None
        # How long after its swap a frame reaches its viewers (OBS capturing the window
        # samples it on its own frame grid, half a frame later on average): added to the
        # swap times the presenter learns from, so frames are made for what is heard then.
        self.viewer_delay_s = 0.0
        self.frame_drawn: Callable[[AvatarFrame | None], None] | None = None
        self._timer = QTimer()
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._on_timer)
        self.frameSwapped.connect(self._on_swapped)

    # -- public API ---------------------------------------------------------------

    def set_rig(self, rig: AvatarRig) -> None:
        """Show `rig` (a sprite or a photo rig); its images are uploaded now if GL is up,
        else at initialisation."""
        self._rig = rig
        self._rig_pending = True
        if self.gl_ready:
            self.makeCurrent()
            self._upload_rig()
            self.doneCurrent()
            self.update()

    def set_sources(self, pose_source: PoseSource | None, media_time_at: MediaClock | None,
                    source_version: Callable[[], int] | None = None) -> None:
        """See Presenter.set_sources: None leaves the avatar idle."""
        self.presenter.set_sources(pose_source, media_time_at, source_version)

    def set_idle_motion(self, blinking: bool = True, breathing: bool = True) -> None:
        self.presenter.set_idle_motion(blinking, breathing)

    def set_avatar_motion(self, motion) -> None:
        self.presenter.set_avatar_motion(motion)

    @property
    def rig(self) -> AvatarRig | None:
        """The rig shown (or to be shown once GL is up)."""
        return self._rig

    @property
    def background(self) -> Background:
        return self._background

    def set_background(self, background: Background) -> None:
        """What shows behind the avatar from the next frame on."""
        self._background = background
        self.renderer.clear_color = _clear_colour(background)
        self.update()

    def stats(self) -> dict:
        """The presenter's counters and timing, and this output's draw times."""
        draws = self._draw_seconds[: min(self.draws, len(self._draw_seconds))] * 1e3
        draw_p50, draw_p99 = np.percentile(draws, (50, 99)) if len(draws) else (0.0, 0.0)
        return {**self.presenter.stats(),
                "draw_ms": {"p50": float(draw_p50), "p99": float(draw_p99)}}

    def grab_frame(self) -> QImage:
        """The avatar as last presented, drawn again into a framebuffer of our own (the
        window's back buffer is undefined after a swap): premultiplied RGBA, alpha kept.
        A null image before the window was first shown."""
        if not self.gl_ready:
            return QImage()
        self.makeCurrent()
        width, height = self.renderer.viewport
        fbo = int(GL.glGenFramebuffers(1))
        rbo = int(GL.glGenRenderbuffers(1))
        try:
            GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, rbo)
            GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, GL.GL_RGBA8, width, height)
            GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
            GL.glFramebufferRenderbuffer(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0,
                                         GL.GL_RENDERBUFFER, rbo)
            self._draw(fbo)
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
            pixels = read_framebuffer(width, height)
        finally:
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.defaultFramebufferObject())
            GL.glDeleteFramebuffers(1, [fbo])
            GL.glDeleteRenderbuffers(1, [rbo])
            self.doneCurrent()
        image = QImage(pixels.data, width, height, 4 * width,
                       QImage.Format.Format_RGBA8888_Premultiplied).copy()
        image.setDevicePixelRatio(self.devicePixelRatio())
        return image

    def shutdown(self) -> None:
        """Stop ticking and producing; GL objects go with the context."""
        self._timer.stop()
        self.presenter.shutdown()

    # -- GL -----------------------------------------------------------------------

    def initializeGL(self) -> None:
        self.renderer.initialize()
        self.context().aboutToBeDestroyed.connect(self._release_gl)
        self.gl_ready = True
        if self._rig_pending:
            self._upload_rig()

    def resizeGL(self, width: int, height: int) -> None:
        # Qt calls this from the resize event with no context made current for it (its
        # documentation says so): the renderer's GL work, and timing the mouth paths at
        # the new size, need this window's.
        size = self._pixels(width, height)
        self.makeCurrent()
        self.renderer.resize(*size)
        if self._rig is not None and not self._rig_pending:
            self.renderer = self._paths.resized(self.renderer, self._rig, size, self)
        self.doneCurrent()

    def _pixels(self, width: int, height: int) -> tuple[int, int]:
        """A size in the window's units in device pixels."""
        ratio = self.devicePixelRatio()
        return max(1, round(width * ratio)), max(1, round(height * ratio))

    def paintGL(self) -> None:
        started = time.perf_counter()
        self._draw(self.defaultFramebufferObject())
        self._draw_seconds[self.draws % len(self._draw_seconds)] = time.perf_counter() - started
        self.draws += 1
        if self.frame_drawn is not None:
            self.frame_drawn(self._frame)
        if self.after_draw is not None:
            self.after_draw(self)

    def _draw(self, target_fbo: int) -> None:
        """Draw the current frame into `target_fbo` (left bound)."""
        chroma = self._background.mode == CHROMA
        if chroma:
            self._compositor.begin(*self.renderer.viewport)
        frame = self._frame
        if frame is None:
            self.renderer.draw(REST, 0.0, 0.0)
        else:
            self.renderer.draw_state(frame.state, 1.0 - frame.state.hidden)
        if chroma:
            self._compositor.finish(target_fbo, self._background.colour)

    def _upload_rig(self) -> None:
        size = self._pixels(self.width(), self.height())
        self.renderer = self._paths.show(self.renderer, self._rig, size, self)
        self._rig_pending = False

    def _release_gl(self) -> None:
        self._paths.forget(self)
        if shiboken6.isValid(self):
            self.makeCurrent()
            self.renderer.release()
            self._compositor.release()
            self.doneCurrent()
        # Else the window is being deleted, and its context with it: no GL call can be
        # made any more (none is current), and the context takes its objects along.
        self.gl_ready = False
        self._rig_pending = self._rig is not None

    # -- ticking ------------------------------------------------------------------

    def _on_swapped(self) -> None:
        self._follow(self.presenter.swapped(self._now() + self.viewer_delay_s))

    def _on_timer(self) -> None:
        self._follow(self.presenter.timer_fired(self._now()))

    def _follow(self, pacing: Pacing) -> None:
        if pacing.frame is not None:
            self._frame = pacing.frame
            self.update()
        if pacing.wake_in is not None:
            # Whole milliseconds only (QTimer); rounding to nearest keeps the tick centred
            # on its deadline. The prediction uses the grid time, not the tick's.
            self._timer.start(max(0, round(pacing.wake_in * 1e3)))


def _clear_colour(background: Background) -> tuple[float, float, float, float]:
    """What the renderer clears to: the colour for solid, else nothing (for chroma the
    compositor puts the key behind the avatar afterwards)."""
    if background.mode == SOLID:
        return background.colour
    return (0.0, 0.0, 0.0, 0.0)
