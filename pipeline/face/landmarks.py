"""Portrait pictures in, face landmarks out: what a photo avatar is built from.

`load_portrait` decodes a PNG or JPEG into RGBA and refuses, with a message for the
user, anything that cannot become an avatar. `FaceLandmarker` wraps MediaPipe's Face
Landmarker (Google's face_landmarker.task, bundled in assets/models): 478 landmarks in
pixels and 52 ARKit-style blendshapes per face. MediaPipe is imported only when a
landmarker is made, so code that merely loads a saved rig never pays for it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from pipeline.core.resources import ASSETS_DIR

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
    user pick one, which is then passed on as `face_index`."""

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


class FaceLandmarker:
    """MediaPipe's Face Landmarker in still-image mode, made once and reused.

    Blocks of the calling thread only; not thread-safe (one image at a time)."""

    def __init__(self, model_path: str | Path = FACE_LANDMARKER_MODEL, max_faces: int = MAX_FACES) -> None:
        model_path = Path(model_path)
        if not model_path.is_file():
            raise PortraitError(f"The face landmark model is missing ({model_path}); reinstall Lipsync Studio.")
        import mediapipe as mp
        from mediapipe.tasks.python import BaseOptions, vision

        self._mp = mp
        options = vision.FaceLandmarkerOptions(
            base_options=BaseOptions(model_asset_path=str(model_path)),
            running_mode=vision.RunningMode.IMAGE,
            num_faces=max_faces,
            output_face_blendshapes=True,
        )
        try:
            self._landmarker = vision.FaceLandmarker.create_from_options(options)
        except (RuntimeError, ValueError) as e:
            raise PortraitError(f"The face landmark model {model_path.name} could not be loaded: {e}") from None

    def detect(self, image: np.ndarray) -> list[FaceLandmarks]:
        """Faces in an H×W×3 or H×W×4 uint8 image, left to right. Transparent pixels are
        seen as mid grey, so a cut-out portrait's hidden colours cannot fake a face."""
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (3, 4):
            raise ValueError(f"expected an H×W×3 or H×W×4 uint8 image, not {image.dtype} {image.shape}")
        rgb = image[..., :3]
        if image.shape[2] == 4 and image[..., 3].min() < 255:
            alpha = image[..., 3:4].astype(np.uint16)
            rgb = ((rgb * alpha + 128 * (255 - alpha) + 127) // 255).astype(np.uint8)
        mp_image = self._mp.Image(image_format=self._mp.ImageFormat.SRGB, data=np.ascontiguousarray(rgb))
        result = self._landmarker.detect(mp_image)
        h, w = image.shape[:2]
        faces = []
        for marks, shapes in zip(result.face_landmarks, result.face_blendshapes):
            points = np.array([(p.x * w, p.y * h, p.z * w) for p in marks], dtype=np.float32)
            x0, y0 = points[:, :2].min(axis=0)
            x1, y1 = points[:, :2].max(axis=0)
            faces.append(FaceLandmarks(points, {s.category_name: float(s.score) for s in shapes},
                                       (float(x0), float(y0), float(x1), float(y1))))
        faces.sort(key=lambda f: f.box[0])
        return faces

    def close(self) -> None:
        if self._landmarker is not None:
            self._landmarker.close()
            self._landmarker = None

    def __enter__(self) -> FaceLandmarker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def find_face(faces: list[FaceLandmarks], what: str, face_index: int | None = None) -> FaceLandmarks:
    """The one face to animate: the only one, or `face_index` among several. PortraitError
    (SeveralFacesError with the boxes when the user must choose) otherwise."""
    if not faces:
        raise PortraitError(f"No face found in {what}. Use a picture where one face looks towards "
                            "the camera, well lit and not covered.")
    if face_index is None:
        if len(faces) > 1:
            boxes = [f.box for f in faces]
            raise SeveralFacesError(f"{what} shows {len(faces)} faces; pick the one to animate.", boxes)
        face = faces[0]
    else:
        if isinstance(face_index, bool) or not isinstance(face_index, int) or not 0 <= face_index < len(faces):
            raise PortraitError(f"Face number {face_index!r} does not exist: {what} shows "
                                f"{len(faces)} face{'s' if len(faces) > 1 else ''} (numbered from 0, left to right).")
        face = faces[face_index]
    if face.width < MIN_FACE_PX:
        raise PortraitError(f"The face in {what} is only {face.width:.0f} px wide, too small to animate: "
                            f"need at least {MIN_FACE_PX} px. Use a closer or larger picture.")
    return face
