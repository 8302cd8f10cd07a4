"""Finding faces of any size in a picture: where they are, before their landmarks.

MediaPipe's face landmarker looks for faces with BlazeFace short-range, a detector that
sees the whole picture at 128×128: a face narrower than about 12 % of the picture's
longer side is a few pixels there and is missed (the same face was found 890 px wide and
not 988 px wide; two people in a 1920×1080 picture were "no face"). `FaceDetector` runs
the same model, read from the landmarker's own bundle, over a pyramid of overlapping
square tiles: level 0 is the whole picture, then tiles FINEST_TILE_FACES × `smallest_face`
wide, and twice, four times… that, while narrower than the picture. Every tile is scaled
to the detector's 128×128, so each level costs its tile count, not its pixels.

Invariant (why a face is never between levels): a tile of side T sits every T/2, so any
face up to T/2 wide lies whole inside one tile; the finest level that holds it whole
also has it at least T/4 wide (or it would be whole in the next, finer level), well
inside the 12 % the detector needs; only faces under 2 × `smallest_face` are smaller
than that in their tile, down to 20 % for `smallest_face` itself. Detections of one face
from several tiles and levels are merged by box overlap.
"""

from __future__ import annotations

import os
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

# The detector inside face_landmarker.task: BlazeFace short-range, 128×128 input.
DETECTOR_FILE = "face_detector.tflite"
DETECTOR_SIDE = 128
# The astronaut's face pasted into square tiles (256 and 512 px): not found at 10 % of
# the tile's side, found at 12 % (score 0.52-0.68) and at 0.89-0.97 from 15 % to 70 %.
# The whole picture is searched at the landmarker's own default for its detector, as it
# always was.
MIN_SCORE = 0.5
# A tile is one of hundreds (614 in a 4096×3072 picture), and textures score too: on 36
# dev pictures (tests/harness/face_pictures.py, seed 5) the tiles gave 922 boxes on no
# face at P50 0.56, P99 0.72, max 0.80, and the landmarker saw a face in 17 of them, all
# scored ≤ 0.66; the 36 real faces scored 0.66 (one, 63 px wide), else 0.77-0.96. The
# landmarks' own check (landmarks.py LANDMARKS_PER_BOX) takes most of the rest, so the
# bar is 0.6: faces found on the dev bench (4 pictures a case) went from 94 to 97 %,
# still with no face found where there is none.
TILE_MIN_SCORE = 0.6
# The finest tiles are this many smallest faces wide: such a face is then 20 % of the
# tile, where the astronaut scored 0.93-0.94; a face half that size (10 %) is found only
# sometimes. The finest level is most of the cost (475 of 614 tiles at 4096×3072); at
# 4 faces wide it was 713 of 920.
FINEST_TILE_FACES = 5
# Tiles are searched on this many threads: the 614 tiles of a 4096×3072 picture took
# 0.67-0.71 s on one thread and 0.34-0.40 s on two (the 2-core development VM).
WORKERS = max(1, min(4, os.cpu_count() or 1))
# Detections of one face from neighbouring tiles or levels overlap by IoU 0.5 or more in
# 95 % of pairs (278 pairs, 30 dev pictures of two faces, seed 41; the least 0.27); a pair
# under the bar gives the same landmarks twice, merged by their own boxes (landmarks.py).
MERGE_IOU = 0.3


@dataclass(frozen=True)
class FaceBox:
    """A face's detected box in pixels of the searched picture (x0, y0, x1, y1), and
    the detector's score."""

    box: tuple[float, float, float, float]
    score: float

    @property
    def side(self) -> float:
        return max(self.box[2] - self.box[0], self.box[3] - self.box[1])

    @property
    def centre(self) -> tuple[float, float]:
        return (self.box[0] + self.box[2]) / 2, (self.box[1] + self.box[3]) / 2


def read_detector(bundle: Path) -> bytes:
    """The face detector model from a face_landmarker.task bundle (a zip). ValueError
    if the bundle has none or is not a zip."""
    try:
        with zipfile.ZipFile(bundle) as z:
            return z.read(DETECTOR_FILE)
    except (zipfile.BadZipFile, KeyError) as e:
        raise ValueError(f"{bundle.name} holds no {DETECTOR_FILE} ({e})") from None


def tile_sides(width: int, height: int, smallest_face: float) -> list[int]:
    """The pyramid's tile sides in pixels, coarsest first: the whole picture's longer
    side, then FINEST_TILE_FACES × `smallest_face` doubled while under it."""
    longest = max(width, height)
    sides = []
    side = round(FINEST_TILE_FACES * smallest_face)
    while side < longest:
        sides.append(side)
        side *= 2
    return [longest] + sides[::-1]


def tile_origins(length: int, side: int) -> list[int]:
    """Tile starts along one axis: every side/2, the last one flush with the far edge,
    so the whole length is covered with at least half a tile of overlap."""
    if length <= side:
        return [0]
    step = side // 2
    starts = list(range(0, length - side, step))
    return starts + [length - side]


def iou(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def merge(found: list[FaceBox], threshold: float = MERGE_IOU) -> list[FaceBox]:
    """One box per face: the best-scored of each group overlapping by IoU above
    `threshold`, best first."""
    kept: list[FaceBox] = []
    for face in sorted(found, key=lambda f: -f.score):
        if all(iou(face.box, k.box) <= threshold for k in kept):
            kept.append(face)
    return kept


@dataclass(frozen=True)
class _Tile:
    level: np.ndarray  # the level's pixels, H×W×3 (a view)
    x: int
    y: int
    to_picture: float  # level pixels to picture pixels
    min_score: float


class FaceDetector:
    """BlazeFace over the tile pyramid, the tiles shared among `workers` threads, each
    with a detector of its own (one MediaPipe detector runs one image at a time).
    Not thread-safe itself (one picture at a time)."""

    def __init__(self, bundle: Path, workers: int = WORKERS) -> None:
        import mediapipe as mp
        from mediapipe.tasks.python import BaseOptions, vision

        self._mp = mp
        options = vision.FaceDetectorOptions(
            base_options=BaseOptions(model_asset_buffer=read_detector(bundle)),
            running_mode=vision.RunningMode.IMAGE,
            min_detection_confidence=MIN_SCORE,
        )
        self._detectors = [vision.FaceDetector.create_from_options(options) for _ in range(workers)]
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="face-tiles")

    def find(self, picture: np.ndarray, smallest_face: float) -> list[FaceBox]:
        """Faces in a C-contiguous H×W×3 (RGB) or H×W×4 (RGBA, the alpha not looked at)
        uint8 picture down to about `smallest_face` px wide, one box per face, best
        first."""
        h, w = picture.shape[:2]
        # RGBA is wrapped by Pillow without a copy; RGB is copied (Pillow keeps 4 bytes
        # a pixel). Each level is scaled so its tiles are the detector's own size, the
        # finest from the picture and the others from the finest: at 4096×3072 the five
        # resizes took 0.32 s all from the picture.
        source = Image.fromarray(picture)
        sides = tile_sides(w, h, smallest_face)
        tiles: list[_Tile] = []
        for n in reversed(range(len(sides))):
            scale = DETECTOR_SIDE / sides[n]
            size = max(1, round(w * scale)), max(1, round(h * scale))
            scaled = source.resize(size, Image.Resampling.BILINEAR, reducing_gap=2.0)
            if n == len(sides) - 1:
                source = scaled
            level = np.asarray(scaled)[..., :3]
            min_score = MIN_SCORE if n == 0 else TILE_MIN_SCORE
            tiles += [_Tile(level, tx, ty, 1 / scale, min_score)
                      for ty in tile_origins(size[1], DETECTOR_SIDE)
                      for tx in tile_origins(size[0], DETECTOR_SIDE)]
        k = len(self._detectors)
        shares = self._pool.map(self._detect, self._detectors, [tiles[i::k] for i in range(k)])
        return merge([box for share in shares for box in share])

    def _detect(self, detector, tiles: list[_Tile]) -> list[FaceBox]:
        boxes = []
        for t in tiles:
            pixels = np.ascontiguousarray(t.level[t.y:t.y + DETECTOR_SIDE, t.x:t.x + DETECTOR_SIDE])
            image = self._mp.Image(image_format=self._mp.ImageFormat.SRGB, data=pixels)
            for d in detector.detect(image).detections:
                score = float(d.categories[0].score)
                if score < t.min_score:
                    continue
                b, f = d.bounding_box, t.to_picture
                x0, y0 = (t.x + b.origin_x) * f, (t.y + b.origin_y) * f
                boxes.append(FaceBox((x0, y0, x0 + b.width * f, y0 + b.height * f), score))
        return boxes

    def close(self) -> None:
        if self._detectors:
            self._pool.shutdown()
            for detector in self._detectors:
                detector.close()
            self._detectors = []
