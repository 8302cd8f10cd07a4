"""A photo rig on disk: a folder holding manifest.json (the landmarks and parameters,
documented in docs/avatar-rig.md) and the picture as PNG. Writing one, and reading one
back: every field checked, with a RigError that says what and where for anything wrong,
then the meshes rebuilt by render/rigs/photo.py (numpy alone, no MediaPipe)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from pipeline.core.json_text import parse_json
from pipeline.face.landmarks import LANDMARK_COUNT, PortraitError, load_portrait
from render.rigs.manifest import RigError, check_manifest_header, file_inside
from render.rigs.photo import PhotoRig, build_photo_rig

FORMAT = "lipsync-studio.photo-rig"
VERSION = 1
MANIFEST = "manifest.json"
IMAGE_FILE = "portrait.png"
REQUIRED_KEYS = ("format", "version", "name", "image", "canvas", "landmarks", "articulation")
OPTIONAL_KEYS = ("source",)
ARTICULATION_RANGE = (0.25, 2.0)
MAX_CANVAS = 4096


def save_photo_rig(rig: PhotoRig, folder: str | Path) -> Path:
    """Write the rig to `folder` (made if missing): manifest.json and the picture as
    PNG. Returns the manifest's path."""
    from PIL import Image

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "name": rig.name,
        "image": IMAGE_FILE,
        "canvas": list(rig.canvas_size),
        "landmarks": [[float(v) for v in p] for p in rig.landmarks],
        "articulation": rig.articulation,
    }
    if rig.source is not None:
        manifest["source"] = Path(rig.source).name
    # Fastest deflate: level 6 took 0.19 s for a 512² portrait (seconds at 4096²)
    # while the user waits, for files only ~15 % smaller.
    Image.fromarray(rig.image, "RGBA").save(folder / IMAGE_FILE, compress_level=1)
    path = folder / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def load_photo_rig(path: str | Path) -> PhotoRig:
    """Load a rig saved by save_photo_rig (its folder or its manifest.json). RigError
    with the reason for anything wrong in it. Needs no MediaPipe."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST
    where = f"Photo avatar {path}"
    if not path.is_file():
        raise RigError(f"{where}: manifest not found.")
    try:
        manifest = parse_json(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError:
        raise RigError(f"{where}: the manifest is not UTF-8 text.") from None
    except json.JSONDecodeError as e:
        raise RigError(f"{where}: not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}.") from None
    except ValueError as e:
        raise RigError(f"{where}: the manifest cannot be read: {e}.") from None
    except OSError as e:
        raise RigError(f"{where}: cannot be read: {e.strerror or e}.") from None
    if not isinstance(manifest, dict):
        raise RigError(f"{where}: the manifest must hold a JSON object {{...}}.")
    name = check_manifest_header(where, manifest, FORMAT, VERSION, REQUIRED_KEYS, OPTIONAL_KEYS)
    source = manifest.get("source")
    canvas = manifest["canvas"]
    if not (isinstance(canvas, list) and len(canvas) == 2 and all(
            isinstance(n, int) and not isinstance(n, bool) and 0 < n <= MAX_CANVAS for n in canvas)):
        raise RigError(f'{where}: "canvas" must be [width, height] in whole pixels, 1 to {MAX_CANVAS}, not {canvas!r}.')
    art = manifest["articulation"]
    lo, hi = ARTICULATION_RANGE
    if isinstance(art, bool) or not isinstance(art, (int, float)) or not lo <= art <= hi:
        raise RigError(f'{where}: "articulation" must be a number from {lo} to {hi}, not {art!r}.')
    landmarks = _check_landmarks(where, manifest["landmarks"], canvas)
    image = _load_rig_image(where, path.parent, manifest["image"], canvas)
    try:
        return build_photo_rig(image, landmarks, name, float(art),
                               source=Path(source) if source is not None else None)
    except PortraitError as e:
        raise RigError(f"{where}: {e.message}") from None


def _check_landmarks(where: str, value, canvas: list[int]) -> np.ndarray:
    ok = (isinstance(value, list) and len(value) == LANDMARK_COUNT and all(
        isinstance(p, list) and len(p) == 3 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in p)
        for p in value))
    if not ok:
        raise RigError(f'{where}: "landmarks" must be {LANDMARK_COUNT} [x, y, z] triples of numbers '
                       "(as written by Lipsync Studio's portrait import).")
    points = np.array(value, dtype=np.float32)
    w, h = canvas
    # Landmarks of a face cut by the picture's edge may lie a little outside it.
    xy = points[:, :2]
    if xy[:, 0].min() < -w or xy[:, 0].max() > 2 * w or xy[:, 1].min() < -h or xy[:, 1].max() > 2 * h:
        raise RigError(f'{where}: "landmarks" lie far outside the {w}×{h} picture; they belong to another picture.')
    return points


def _load_rig_image(where: str, folder: Path, rel, canvas: list[int]) -> np.ndarray:
    if not isinstance(rel, str) or not rel.strip():
        raise RigError(f'{where}: "image" must name the picture file, not {rel!r}.')
    file = file_inside(where, '"image"', folder.resolve(), rel)
    try:
        image = load_portrait(file)
    except PortraitError as e:
        raise RigError(f"{where}: {e.message}") from None
    except OSError as e:  # a name too long for the file system, say
        raise RigError(f'{where}: "image" cannot be read: {e.strerror or e}.') from None
    if [image.shape[1], image.shape[0]] != list(canvas):
        raise RigError(f"{where}: the picture is {image.shape[1]}×{image.shape[0]}, but the "
                       f"manifest's canvas is {canvas[0]}×{canvas[1]}.")
    return image
