"""The avatar in the app's main window: an AvatarSurface (a native GL window of its own)
inside a window container, with the app's overlays painted over it.

The avatar is a native window rather than a QOpenGLWidget: a widget's frame is drawn
into a texture that Qt then composes with the rest of the window on every frame. With
software GL (llvmpipe, 2 cores) at 60 fps that cost the idle app 1.27 cores, and it held
only 52.6 fps; as a window 0.53 cores at 59.9 fps, 8.8 ms of CPU a frame instead of 24
(bench/results/app_cpu_vm_2core_epyc.json, medians of 3 interleaved rounds). A native
window is swapped on its own and nothing else is redrawn with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QImage, QPainter, QRegion, QWindow
from PySide6.QtWidgets import QWidget

from render.gpu.path_picker import MouthPathPicker
from render.outputs.avatar_surface import AvatarSurface
from render.outputs.background import SOLID, TRANSPARENT, Background
from render.rigs.loader import AvatarRig
from render.timing.frame_producer import MediaClock, PoseSource
from render.timing.presenter import LATE_HELD, LATE_INTERPOLATED, LOG_DTYPE, PRESENTED

# The statuses and the log's rows are the presenter's; the app reads them from here.
__all__ = ["AvatarView", "LATE_HELD", "LATE_INTERPOLATED", "LOG_DTYPE", "PRESENTED"]


class AvatarView(QWidget):
    """Renders a rig, its mouth pulled from the presenter's frame slots on the display tick.

    Child widgets of the view (the app's landmark overlay) are painted over the avatar
    inside its GL window: the native window would hide them otherwise."""

    name = "view"  # beside the outputs' names, in the API's status

    def __init__(self, parent=None, *, fps: float = 60.0,
                 clear_color: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
                 slot_count: int = 30, lookahead: float = 0.2, seed: int = 0,
                 log_rows: int = 36_000, now: Callable[[], float] = time.monotonic,
                 mouth_paths: MouthPathPicker | None = None) -> None:
        super().__init__(parent)
        # The container takes the window and deletes it with itself, but PySide (6.11)
        # leaves a window made in Python owned by Python too, and the second delete
        # crashed the process at exit. Made as another window's child, it is C++'s from
        # the start; the container re-parents it at once, and the stand-in can go.
        stand_in = QWindow()
        self._surface = AvatarSurface(fps=fps, background=_background(clear_color),
                                      slot_count=slot_count, lookahead=lookahead, seed=seed,
                                      log_rows=log_rows, now=now, mouth_paths=mouth_paths,
                                      parent=stand_in)
        # Clicks, drops and focus belong to the widgets around it, as with a widget: the
        # text field keeps the keyboard when the avatar is clicked.
        self._surface.setFlag(Qt.WindowType.WindowDoesNotAcceptFocus)
        self._surface.setFlag(Qt.WindowType.WindowTransparentForInput)
        self._surface.after_draw = self._paint_overlays
        self._container = QWidget.createWindowContainer(self._surface, self)
        self._container.setFocusPolicy(Qt.FocusPolicy.NoFocus)

    # The surface's parts, where the app, tests and benchmarks look at them.
    @property
    def surface(self) -> AvatarSurface:
        return self._surface

    @property
    def presenter(self):
        return self._surface.presenter

    @property
    def renderer(self):
        return self._surface.renderer

    @property
    def rig(self):
        return self._surface.rig

    @property
    def period(self) -> float:
        return self.presenter.period

    @property
    def slots(self):
        return self.presenter.slots

    @property
    def clock(self):
        return self.presenter.clock

    @property
    def _draws(self) -> int:
        return self._surface.draws

    # -- public API ---------------------------------------------------------------

    def set_rig(self, rig: AvatarRig) -> None:
        """Show `rig` (a sprite or a photo rig); its images are uploaded now if GL is up,
        else at initialisation."""
        self._surface.set_rig(rig)

    def set_sources(self, pose_source: PoseSource | None,
                    media_time_at: MediaClock | None,
                    source_version: Callable[[], int] | None = None) -> None:
        """Pull frames made by `pose_source` at the times `media_time_at` says are heard.
        `source_version` changes whenever the source's answers may have changed, so frames
        made ahead are made again. None for a source or clock leaves the avatar idle
        (its last mouth, blinking, breathing)."""
        self._surface.set_sources(pose_source, media_time_at, source_version)

    def set_idle_motion(self, blinking: bool = True, breathing: bool = True) -> None:
        """Switch blinking and breathing on or off (both on by default)."""
        self._surface.set_idle_motion(blinking, breathing)

    def set_avatar_motion(self, motion) -> None:
        self._surface.set_avatar_motion(motion)

    def set_clear_color(self, color: tuple[float, float, float, float]) -> None:
        """Background as straight RGBA in 0..1; alpha 0 is transparent (grab() keeps the
        alpha)."""
        self._surface.set_background(_background(color))

    def stats(self) -> dict:
        """The presenter's counters and timing, and this output's draw times."""
        return self._surface.stats()

    def presentation_log(self):
        """A copy of the logged ticks, oldest first (the newest `log_rows` of them)."""
        return self.presenter.presentation_log()

    def grab(self) -> QImage:
        """A screenshot of the avatar as rendered (alpha included, overlays not); a null
        image before the window was first shown."""
        return self._surface.grab_frame()

    def shutdown(self) -> None:
        """Stop ticking and producing; GL objects go with the context."""
        self._surface.shutdown()

    # -- layout -------------------------------------------------------------------

    def resizeEvent(self, event) -> None:
        # At once, not through a layout: the window must have the view's size before the
        # next tick draws (and a grab reads) it.
        self._container.setGeometry(QRect(0, 0, self.width(), self.height()))
        super().resizeEvent(event)

    def _paint_overlays(self, surface: AvatarSurface) -> None:
        overlays = [child for child in self.children()
                    if child is not self._container and child.isWidgetType() and child.isVisible()]
        if overlays:
            painter = QPainter(surface)
            for overlay in overlays:
                overlay.render(painter, overlay.pos(), QRegion(),
                               QWidget.RenderFlag.DrawChildren)
            painter.end()


def _background(color: tuple[float, float, float, float]) -> Background:
    return Background(TRANSPARENT if color[3] <= 0.0 else SOLID, color)
