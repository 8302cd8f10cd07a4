"""Turning a picture into the avatar: "Import portrait…" and drag & drop.

Finding the face means loading MediaPipe's model and running it (a few tenths of a
second), so it happens on a worker thread and the avatar keeps animating meanwhile. The
rig is saved in the settings folder (avatars/<name>/) with its landmarks, so the next
start loads it directly, without MediaPipe. A picture with several faces asks which one
to animate; every other failure is a message for the user. Every import goes into the
avatar library (app/avatar_library.py), which gives back the rig made before when the
same picture and face come again.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, QPointF, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QImage, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.avatar_library import AvatarLibrary, FacesToChoose, LibraryError
from pipeline.face.landmarks import FaceLandmarker, PortraitError
from render.gl.sprite_renderer import letterbox_fit
from render.rigs.manifest import RigError
from render.rigs.photo import PhotoRig

# How long the detected landmarks stay drawn over the new avatar.
LANDMARKS_SHOWN_MS = 1500
THUMBNAIL_PX = 120


class PortraitImporter(QObject):
    """Imports one picture at a time into `library` (the studio's); its signals
    arrive on the thread that owns it. `reused` tells whether the last import found the
    picture's rig from before (no face finding, nothing new saved)."""

    imported = Signal(object, float)  # PhotoRig, seconds from the request
    saved = Signal(object, str)  # PhotoRig, its manifest path
    several_faces = Signal(str, object, object)  # picture path, RGBA image, face boxes
    failed = Signal(str)

    def __init__(self, library: AvatarLibrary, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.library = library
        self.avatars_dir = library.folder
        self.reused = False
        self._busy = threading.Lock()
        # Kept between imports: the model loads once, ideally while the user is still
        # picking the file (prepare).
        self._model_lock = threading.Lock()
        self._landmarker: FaceLandmarker | None = None

    @property
    def busy(self) -> bool:
        return self._busy.locked()

    def start(self, path: str | Path, face_index: int | None = None) -> bool:
        """Begin importing `path`; False if an import is already running."""
        if not self._busy.acquire(blocking=False):
            return False
        threading.Thread(target=self._run, args=(Path(path), face_index),
                         name="portrait-import", daemon=True).start()
        return True

    def prepare(self) -> None:
        """Load the face model in the background now (a file dialog opened, a drag
        entered), so the import itself only finds the face."""
        threading.Thread(target=self._model, name="face-model", daemon=True).start()

    def close(self) -> None:
        with self._busy, self._model_lock:
            if self._landmarker is not None:
                self._landmarker.close()
                self._landmarker = None

    def _model(self) -> FaceLandmarker:
        with self._model_lock:
            self._landmarker = self._landmarker or FaceLandmarker()
            return self._landmarker

    def _run(self, path: Path, face_index: int | None) -> None:
        started = time.perf_counter()

        def show(rig: PhotoRig, reused: bool) -> None:
            self.reused = reused
            self.imported.emit(rig, time.perf_counter() - started)

        try:
            result = self.library.import_picture(path, face_index, self._model, on_rig=show)
        except FacesToChoose as exc:
            self.several_faces.emit(str(path), exc.image, exc.boxes)
        except (PortraitError, RigError) as exc:
            self.failed.emit(exc.message)
        except LibraryError as exc:
            self.failed.emit(str(exc))
        except OSError as exc:
            self.failed.emit(f"The avatar is shown but could not be saved in "
                             f"{self.avatars_dir} ({exc.strerror or exc}); it will not be "
                             "there at the next start.")
        else:
            self.saved.emit(result.rig, str(result.avatar.manifest))
        finally:
            self._busy.release()


class FacePicker(QDialog):
    """Shows each face found, cropped from the picture; `chosen` carries the index of
    the one clicked (faces are numbered left to right, as FacesToChoose gives them)."""

    chosen = Signal(int)

    def __init__(self, name: str, image: np.ndarray, boxes, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Which face?")
        self.buttons: list[QPushButton] = []
        row = QHBoxLayout()
        for index, box in enumerate(boxes):
            button = QPushButton(f"Face {index + 1}")
            button.setIcon(_thumbnail(image, box))
            button.setIconSize(QSize(THUMBNAIL_PX, THUMBNAIL_PX))
            button.clicked.connect(lambda _=False, i=index: self._choose(i))
            row.addWidget(button)
            self.buttons.append(button)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"{name} shows {len(boxes)} faces. Which one should talk?"))
        layout.addLayout(row)

    def _choose(self, index: int) -> None:
        self.chosen.emit(index)
        self.accept()


def _thumbnail(image: np.ndarray, box) -> QPixmap:
    h, w = image.shape[:2]
    x0, y0, x1, y1 = box
    pad = 0.15 * max(x1 - x0, y1 - y0)
    x0, y0 = max(0, int(x0 - pad)), max(0, int(y0 - pad))
    x1, y1 = min(w, int(x1 + pad) + 1), min(h, int(y1 + pad) + 1)
    crop = np.ascontiguousarray(image[y0:y1, x0:x1])
    qimage = QImage(crop.data, crop.shape[1], crop.shape[0], crop.strides[0],
                    QImage.Format.Format_RGBA8888).copy()
    return QPixmap.fromImage(qimage).scaled(THUMBNAIL_PX, THUMBNAIL_PX,
                                            Qt.AspectRatioMode.KeepAspectRatio,
                                            Qt.TransformationMode.SmoothTransformation)


class LandmarkOverlay(QWidget):
    """The landmarks a new photo avatar was built from, drawn over the view for a moment
    so the user sees what was found (and where it went wrong, if it did)."""

    def __init__(self, view: QWidget) -> None:
        super().__init__(view)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setAttribute(Qt.WidgetAttribute.WA_NoSystemBackground)
        self._rig: PhotoRig | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.hide)
        self.hide()

    def show_for(self, rig: PhotoRig, milliseconds: int = LANDMARKS_SHOWN_MS) -> None:
        self._rig = rig
        self.setGeometry(self.parentWidget().rect())
        self.show()
        self.raise_()
        self._timer.start(milliseconds)

    def to_view(self, points: np.ndarray) -> np.ndarray:
        """Canvas pixels → this widget's coordinates, letterboxed as the renderer draws."""
        cw, ch = self._rig.canvas_size
        vw, vh = self.width(), self.height()
        fx, fy = letterbox_fit((cw, ch), (vw, vh))
        scale = np.array([vw * fx / cw, vh * fy / ch])
        offset = np.array([vw * (1 - fx) / 2, vh * (1 - fy) / 2])
        return points[:, :2] * scale + offset

    def paintEvent(self, event) -> None:
        if self._rig is None:
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(80, 255, 120, 200))
        for x, y in self.to_view(self._rig.landmarks):
            painter.drawEllipse(QPointF(x, y), 1.6, 1.6)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.setPen(QPen(QColor(255, 200, 0, 220), 1.5))
        border = self.to_view(self._rig.border)
        for a, b in zip(border, np.roll(border, -1, axis=0)):
            painter.drawLine(QPointF(*a), QPointF(*b))
        painter.end()

    def mouth_box(self) -> QRectF:
        """Where the mouth region lies in the view (for tests and tooltips)."""
        x0, y0, x1, y1 = self._rig.mouth_rect
        (ax, ay), (bx, by) = self.to_view(np.array([[x0, y0], [x1, y1]], float))
        return QRectF(ax, ay, bx - ax, by - ay)
