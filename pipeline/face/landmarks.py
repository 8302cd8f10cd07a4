"""Portrait pictures in, face landmarks out: what a photo avatar is built from.

`load_portrait` decodes a PNG or JPEG into RGBA and refuses, with a message for the
user, anything that cannot become an avatar. `FaceLandmarker` finds faces of any size
(detection.py's tile pyramid) and runs MediaPipe's Face Landmarker (Google's
face_landmarker.task, bundled in assets/models) on each: 478 landmarks in pixels and 52
ARKit-style blendshapes per face. `find_face` picks the one to animate. MediaPipe is
imported only when a landmarker is made, so code that merely loads a saved rig never
pays for it.
"""

from __future__ import annotations

import ctypes
import math
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from pipeline.core.resources import ASSETS_DIR
from pipeline.face.detection import MERGE_IOU, FaceBox, FaceDetector, iou

FACE_LANDMARKER_MODEL = ASSETS_DIR / "models" / "face_landmarker.task"
LANDMARK_COUNT = 478
MAX_FACES = 4
# Checked from the file header, before any pixel is decoded. A PNG is decoded whole, so
# its size is what memory it takes (50 MP: 200 MB of RGBA); a JPEG is decoded already
# scaled down by the DCT (Image.draft), to about twice the working size at most, so any
# size up to Pillow's own decompression-bomb limit is read in bounded memory (a
# 12000×14062 scan: 6000×7031 decoded, 127 MB, then scaled to 4096).
MAX_SIDE = 10_000
MAX_PIXELS = 50_000_000
MAX_JPEG_SIDE = 65_500  # the format's own limit
MAX_JPEG_PIXELS = 2 * Image.MAX_IMAGE_PIXELS
MIN_SIDE = 64
# Larger pictures are scaled down at import: the avatar gains nothing from more pixels
# than a 4K screen shows, and every texture and frame would cost more.
WORKING_MAX_SIDE = 4096
# Face box width (landmark extent) below which a mouth is too few pixels to animate.
MIN_FACE_PX = 64
# A face's crop for its landmarks: its detected box (about as wide as the landmarks'
# extent: 0.8-1.26 times, below) times CROP_SIDES, so the landmarker's own detector sees
# it at about a third of the crop, inside the 15-70 % it finds surely; scaled to at most CROP_MAX_SIDE, which keeps
# the face above the landmark model's 256×256 input.
CROP_SIDES = 3.0
CROP_MAX_SIDE = 960
# The landmarks found in a crop must be of the face detected there: on 60 dev pictures
# (tests/harness/face_pictures.py, seed 11) the 58 real faces had landmark boxes 0.8-1.26
# times the detected box's side, centred within 0.12 of it; of the 31 boxes on no face
# where the landmarker saw a face, 29 were outside these bounds.
LANDMARKS_PER_BOX = (0.75, 1.4)
MAX_CENTRE_OFFSET = 0.2
FORMATS = ("PNG", "JPEG")
LIMITS = (f"the limit is {MAX_SIDE} pixels on a side and {MAX_PIXELS // 1_000_000} megapixels "
          f"for a PNG, {MAX_JPEG_PIXELS // 1_000_000} megapixels for a JPEG (save a larger "
          "picture as a JPEG, or scale it down)")


class PortraitError(Exception):
    """A picture that cannot become a photo avatar; the message is for the user."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class SeveralFacesError(PortraitError):
    """More than one face: `boxes` (x0, y0, x1, y1 in pixels, left to right) lets the
    user pick one, which is then passed on as `face_index`. The message lists them
    numbered as `face_index` (and the command line's --face N) takes them."""

    def __init__(self, message: str, boxes: list[tuple[float, float, float, float]]):
        super().__init__(message)
        self.boxes = boxes


@dataclass(frozen=True)
class FaceLandmarks:
    """One face. `points` is 478×3 float32: x, y in pixels of the analysed image, top-left
    origin; z is depth relative to the head centre, in the same pixel scale as x."""

    points: np.ndarray
    blendshapes: dict[str, float]
    box: tuple[float, float, float, float]

    @property
    def width(self) -> float:
        return self.box[2] - self.box[0]


def load_portrait(path: str | Path) -> np.ndarray:
    """Decode a PNG or JPEG into H×W×4 uint8 RGBA (straight alpha, top row first),
    upright per its EXIF orientation and at most WORKING_MAX_SIDE on its longer side.
    PortraitError for anything that is not a usable picture."""
    path = Path(path)
    what = f"The picture {path.name}"
    if not path.exists():
        raise PortraitError(f"{what} was not found ({path}).")
    if not path.is_file():
        raise PortraitError(f"{what} is not a file ({path}).")
    with warnings.catch_warnings():
        # Our own limits, per format, come from the header (_check_header); Pillow's
        # guard still refuses past twice its limit.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            with Image.open(path) as im:
                _check_header(what, im)
                if im.format == "JPEG" and max(im.size) > WORKING_MAX_SIDE:
                    scale = WORKING_MAX_SIDE / max(im.size)
                    im.draft(im.mode, (math.ceil(im.width * scale), math.ceil(im.height * scale)))
                im.load()
                ImageOps.exif_transpose(im, in_place=True)
                im = _scaled(im)
                rgba = _to_rgba(im)
        except PortraitError:
            raise
        except Image.DecompressionBombError:
            raise PortraitError(f"{what} is too large to open safely; {LIMITS}") from None
        except Image.UnidentifiedImageError:
            raise PortraitError(f"{what} is not a picture Lipsync Studio can read (or the file is "
                                "damaged); use a PNG or JPEG file.") from None
        except (OSError, SyntaxError, ValueError) as e:
            raise PortraitError(f"{what} could not be decoded ({e}); the file may be damaged or "
                                "cut short.") from None
    h, w = rgba.shape[:2]
    size = _working_size(w, h)
    if size is not None:
        rgba = np.asarray(Image.fromarray(rgba, "RGBA").resize(size, Image.Resampling.LANCZOS))
    return np.ascontiguousarray(rgba)


def _working_size(w: int, h: int) -> tuple[int, int] | None:
    if max(w, h) <= WORKING_MAX_SIDE:
        return None
    scale = WORKING_MAX_SIDE / max(w, h)
    return max(1, round(w * scale)), max(1, round(h * scale))


def _scaled(im: Image.Image) -> Image.Image:
    """At the working size, scaled while still in the file's own mode: an 8-bit RGB
    picture is scaled before it becomes RGBA and a NumPy copy, so a 48 MP photo peaks at
    its decoded RGB plus the small result (~190 MB) rather than three full-size copies
    (~690 MB). 16-bit and float greyscale are scaled after conversion (below)."""
    size = _working_size(*im.size)
    if size is None or im.mode.startswith("I;16") or im.mode in ("I", "F"):
        return im
    if im.mode in ("P", "PA", "CMYK"):
        im = im.convert("RGBA")
    return im.resize(size, Image.Resampling.LANCZOS)


def _check_header(what: str, im: Image.Image) -> None:
    if im.format not in FORMATS:
        raise PortraitError(f"{what} is a {im.format or 'unknown'} image; use a PNG or JPEG file.")
    w, h = im.size
    side, pixels = ((MAX_JPEG_SIDE, MAX_JPEG_PIXELS) if im.format == "JPEG"
                    else (MAX_SIDE, MAX_PIXELS))
    if w > side or h > side or w * h > pixels:
        raise PortraitError(f"{what} is {w}×{h} pixels, too large: {LIMITS}")
    if w < MIN_SIDE or h < MIN_SIDE:
        raise PortraitError(f"{what} is {w}×{h} pixels, too small: need at least {MIN_SIDE} px "
                            "on each side.")


def _to_rgba(im: Image.Image) -> np.ndarray:
    if im.mode.startswith("I;16") or im.mode in ("I", "F"):
        # 16-bit and float greyscale: Pillow's own conversion clips instead of scaling.
        grey = np.asarray(im, dtype=np.float64)
        top = 65535.0 if im.mode != "F" else max(float(grey.max()), 1e-12)
        grey8 = np.clip(grey * (255.0 / top) + 0.5, 0, 255).astype(np.uint8)
        return np.dstack([grey8, grey8, grey8, np.full_like(grey8, 255)])
    if im.mode == "CMYK":
        im = im.convert("RGB")
    return np.asarray(im.convert("RGBA"))


def return_freed_memory() -> None:
    """Hand the memory this thread's work freed back to the system (glibc only).

    glibc keeps what a thread frees in that thread's malloc arena, for that thread to
    reuse. Each import runs on a thread of its own and decodes, scales and searches a
    picture of up to 4096×3072 in buffers under the 32 MB that glibc would map apart, so
    what one import freed stayed in its arena while the next import, on another thread,
    took more. Measured, six imports of a 48-megapixel photo on a thread each
    (tests/test_face_detection.py): RSS 176-469 MB after each import and a 655 MB peak;
    trimmed after each search, 111-112 MB and 477-493 MB."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return  # not glibc (musl has no arenas to trim)
    trim(0)


class FaceLandmarker:
    """Faces of any size in a picture: `FaceDetector`'s tile pyramid says where they are,
    then MediaPipe's Face Landmarker, in still-image mode, finds each one's landmarks in
    a crop around it, mapped back to the whole picture's pixels. Made once and reused.

    Blocks of the calling thread only; not thread-safe (one image at a time)."""

    def __init__(self, model_path: str | Path = FACE_LANDMARKER_MODEL, max_faces: int = MAX_FACES) -> None:
        model_path = Path(model_path)
        if not model_path.is_file():
            raise PortraitError(f"The face landmark model is missing ({model_path}); reinstall Lipsync Studio.")
        import mediapipe as mp
        from mediapipe.tasks.python import BaseOptions, vision

        self._mp = mp
        self.max_faces = max_faces
        options = vision.FaceLandmarkerOptions(
            base_options=BaseOptions(model_asset_path=str(model_path)),
            running_mode=vision.RunningMode.IMAGE,
            # A crop may hold a neighbour's face too; the one at its centre is kept.
            num_faces=2,
            output_face_blendshapes=True,
        )
        try:
            self._detector = FaceDetector(model_path)
            self._landmarker = vision.FaceLandmarker.create_from_options(options)
        except (RuntimeError, ValueError) as e:
            raise PortraitError(f"The face landmark model {model_path.name} could not be loaded: {e}") from None

    def detect(self, image: np.ndarray) -> list[FaceLandmarks]:
        """Faces in an H×W×3 or H×W×4 uint8 image, left to right, down to MIN_FACE_PX
        wide (and many down to about half that, so a face too small is told so rather
        than missed); at most `max_faces`, the detector's surest. Transparent pixels are
        seen as mid grey, so a cut-out portrait's hidden colours cannot fake a face."""
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (3, 4):
            raise ValueError(f"expected an H×W×3 or H×W×4 uint8 image, not {image.dtype} {image.shape}")
        picture = image
        if image.shape[2] == 4 and image[..., 3].min() < 255:
            alpha = image[..., 3:4].astype(np.uint16)
            picture = ((image[..., :3] * alpha + 128 * (255 - alpha) + 127) // 255).astype(np.uint8)
        faces: list[FaceLandmarks] = []
        # The picture as it is, alpha channel and all: a copy without it would be one
        # more full-size array (50 MB at 4096×3072) per import.
        for found in self._detector.find(np.ascontiguousarray(picture), MIN_FACE_PX):
            face = self._landmarks_around(picture, found)
            if face is not None and all(iou(face.box, f.box) <= MERGE_IOU for f in faces):
                faces.append(face)
            if len(faces) == self.max_faces:
                break
        faces.sort(key=lambda f: f.box[0])
        return_freed_memory()
        return faces

    def _landmarks_around(self, picture: np.ndarray, found: FaceBox) -> FaceLandmarks | None:
        """The landmarks of the face in `found`, from a crop CROP_SIDES times its box
        (clipped to the picture), scaled so the face reaches the landmark model at about
        its own input size; None if the landmarker sees no face there of that box's
        size and place."""
        h, w = picture.shape[:2]
        cx, cy = found.centre
        half = CROP_SIDES * found.side / 2
        x0, y0 = max(0, int(cx - half)), max(0, int(cy - half))
        x1, y1 = min(w, int(math.ceil(cx + half))), min(h, int(math.ceil(cy + half)))
        crop = picture[y0:y1, x0:x1, :3]
        scale = min(1.0, CROP_MAX_SIDE / max(crop.shape[:2]))
        if scale < 1.0:
            size = max(1, round(crop.shape[1] * scale)), max(1, round(crop.shape[0] * scale))
            crop = np.asarray(Image.fromarray(crop).resize(size, Image.Resampling.BILINEAR, reducing_gap=2.0))
        ch, cw = crop.shape[:2]
        mp_image = self._mp.Image(image_format=self._mp.ImageFormat.SRGB, data=np.ascontiguousarray(crop))
        result = self._landmarker.detect(mp_image)
        best = None
        for marks, shapes in zip(result.face_landmarks, result.face_blendshapes):
            points = np.array([(p.x * cw, p.y * ch, p.z * cw) for p in marks], dtype=np.float32)
            points /= scale
            points[:, 0] += x0
            points[:, 1] += y0
            lo, hi = points[:, :2].min(axis=0), points[:, :2].max(axis=0)
            off = math.hypot((lo[0] + hi[0]) / 2 - cx, (lo[1] + hi[1]) / 2 - cy) / found.side
            ratio = (hi[0] - lo[0]) / found.side
            if not (LANDMARKS_PER_BOX[0] <= ratio <= LANDMARKS_PER_BOX[1] and off <= MAX_CENTRE_OFFSET):
                continue
            if best is None or off < best[0]:
                box = (float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1]))
                best = off, FaceLandmarks(points, {s.category_name: float(s.score) for s in shapes}, box)
        return None if best is None else best[1]

    def close(self) -> None:
        if self._landmarker is not None:
            self._landmarker.close()
            self._landmarker = None
            self._detector.close()

    def __enter__(self) -> FaceLandmarker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def several_faces_message(what: str, boxes: list[tuple[float, float, float, float]]) -> str:
    """Each face on a line of its own, by number and where it is in the picture, so a
    user can tell which number is whom."""
    lines = [f"{what} shows {len(boxes)} faces; pick the one to animate "
             "(numbered from 0, left to right):"]
    for n, (x0, y0, x1, y1) in enumerate(boxes):
        lines.append(f"  face {n}: {x1 - x0:.0f}×{y1 - y0:.0f} px at x {x0:.0f}-{x1:.0f}, "
                     f"y {y0:.0f}-{y1:.0f}")
    return "\n".join(lines)


def animatable(faces: list[FaceLandmarks]) -> list[FaceLandmarks]:
    """The faces at least MIN_FACE_PX wide, in their order: those find_face offers and
    numbers. A narrower one (a crowd behind the speaker, or a face-like patch of a
    4096-px picture) could not be animated, so it never makes the user choose."""
    return [f for f in faces if f.width >= MIN_FACE_PX]


def find_face(faces: list[FaceLandmarks], what: str, face_index: int | None = None) -> FaceLandmarks:
    """The one face to animate among `animatable(faces)`: the only one, or `face_index`
    (from 0, left to right) among several. PortraitError (SeveralFacesError with the
    boxes when the user must choose) otherwise, saying a face is too small when only
    faces under MIN_FACE_PX were found."""
    if not faces:
        raise PortraitError(f"No face found in {what}. Use a picture where one face looks towards "
                            "the camera, well lit and not covered.")
    usable = animatable(faces)
    if not usable:
        widest = max(f.width for f in faces)
        raise PortraitError(f"The face in {what} is only {widest:.0f} px wide, too small to animate: "
                            f"need at least {MIN_FACE_PX} px. Use a closer or larger picture.")
    if face_index is None:
        if len(usable) > 1:
            boxes = [f.box for f in usable]
            raise SeveralFacesError(several_faces_message(what, boxes), boxes)
        return usable[0]
    if isinstance(face_index, bool) or not isinstance(face_index, int) or not 0 <= face_index < len(usable):
        raise PortraitError(f"Face number {face_index!r} does not exist: {what} shows "
                            f"{len(usable)} face{'s' if len(usable) > 1 else ''} (numbered from 0, left to right).")
    return usable[face_index]
