"""Sprite rigs: same-canvas image layers plus one mouth drawing per group of visemes.

The manifest format is documented for users in docs/avatar-rig.md. Everything a user
can get wrong in a rig folder surfaces as a RigError whose message says what and where,
because rigs are hand-made and a traceback tells an artist nothing.

Loading needs no QGuiApplication: QSvgRenderer, QImage and QPainter on a QImage are
pure raster code. The one exception is SVG text, which goes through QFontDatabase and
aborts the process without a QGuiApplication; such files are refused with a RigError
unless an application object exists. Qt is imported where an image is read, not with
the module: the rig's record, and render/rigs/loader.py's table of kinds with it, load
where PySide6 is not installed (the GPU test machine).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.core.avatar_state import EXPRESSIONS
from pipeline.core.json_text import parse_json
from pipeline.core.visemes import OVR_VISEMES
from render.rigs.manifest import RigError, check_manifest_header, file_inside

FORMAT = "lipsync-studio.sprite-rig"
VERSION = 1
LAYER_KEYS: tuple[str, ...] = ("base", "eyes_open", "eyes_closed")
REQUIRED_KEYS: tuple[str, ...] = ("format", "version", "name", "canvas", "layers", "mouths", "visemes")
OPTIONAL_KEYS: tuple[str, ...] = ("license", "author")
# "expressions" is optional and an object, not a text: checked apart from the header's texts.
EXPRESSIONS_KEY = "expressions"
EXPRESSION_KEYS: tuple[str, ...] = ("swap", "overlays")
# The CUDA kernel's parameter record holds a fixed number of layers (shaders/sprite.cu
# MAX_LAYERS = 3 + 2 expressions' overlays during a fade).
MAX_OVERLAYS = 4
# Larger canvases would need gigabytes once every mouth is rasterised.
MAX_CANVAS = 4096
_SVG_TEXT_TAGS = frozenset({"text", "tspan", "textPath", "textArea", "flowRoot"})


@dataclass(frozen=True)
class SpriteExpression:
    """One expression: the layers it swaps (a LAYER_KEYS name → its image) and the
    overlays it adds above the eyes, below the mouth; images as SpriteRig's."""

    swaps: dict[str, np.ndarray]
    overlays: tuple[np.ndarray, ...]


@dataclass
class SpriteRig:
    """A loaded rig. Every image is H×W×4 uint8 RGBA, straight alpha, top row first,
    and exactly canvas_size, so layers stack without offsets."""

    name: str
    canvas_size: tuple[int, int]  # (width, height) of the arrays, as in the manifest's "canvas"
    base: np.ndarray
    eyes_open: np.ndarray
    eyes_closed: np.ndarray
    mouths: dict[str, np.ndarray]
    viseme_to_mouth: dict[str, str]
    source: Path
    # By name, in EXPRESSIONS' order; neutral is the layers themselves.
    expressions: dict[str, SpriteExpression] = field(default_factory=dict)


def load_sprite_rig(manifest_path: str | Path, size: int | None = None) -> SpriteRig:
    """Load and rasterise the rig described by a manifest (or a folder holding
    manifest.json). With size, images are scaled so the canvas's longer side is size
    pixels; without it they are canvas-sized."""
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
        raise ValueError(f"size must be a positive int or None, not {size!r}")
    path = Path(manifest_path)
    if path.is_dir():
        path = path / "manifest.json"
    manifest = _read_manifest(path)
    where = f"Avatar rig {path}"

    name = check_manifest_header(where, manifest, FORMAT, VERSION, REQUIRED_KEYS, OPTIONAL_KEYS,
                                 (EXPRESSIONS_KEY,))
    canvas = _check_canvas(where, manifest["canvas"])
    layers = _check_file_table(where, "layers", manifest["layers"], required=LAYER_KEYS)
    mouths = _check_file_table(where, "mouths", manifest["mouths"], required=())
    if not mouths:
        raise RigError(f'{where}: "mouths" is empty; a rig needs at least one mouth drawing.')
    visemes = _check_visemes(where, manifest["visemes"], mouths)
    expressions = _check_expressions(where, manifest.get(EXPRESSIONS_KEY, {}))

    if size is None:
        out_size = canvas
    else:
        scale = size / max(canvas)
        out_size = (max(1, round(canvas[0] * scale)), max(1, round(canvas[1] * scale)))
    rig_dir = path.parent.resolve()
    cache: dict[Path, np.ndarray] = {}

    def image(table: str, key: str, rel: str) -> np.ndarray:
        file = file_inside(where, f'{table} "{key}"', rig_dir, rel)
        if file not in cache:
            cache[file] = _load_image(f'{where}, {table} "{key}" ({rel})', file, canvas, out_size)
        return cache[file]

    return SpriteRig(
        name=name,
        canvas_size=out_size,
        base=image("layers", "base", layers["base"]),
        eyes_open=image("layers", "eyes_open", layers["eyes_open"]),
        eyes_closed=image("layers", "eyes_closed", layers["eyes_closed"]),
        mouths={m: image("mouths", m, rel) for m, rel in mouths.items()},
        viseme_to_mouth={v: visemes[v] for v in OVR_VISEMES},
        source=path.resolve(),
        expressions={
            e: SpriteExpression(
                swaps={k: image(f"expression {e} swap", k, rel) for k, rel in spec["swap"].items()},
                overlays=tuple(image(f"expression {e} overlays", str(i + 1), rel)
                               for i, rel in enumerate(spec["overlays"])))
            for e, spec in expressions.items()},
    )


def _read_manifest(path: Path) -> dict:
    if not path.exists():
        raise RigError(f"Avatar rig manifest not found: {path}.")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise RigError(f"Avatar rig manifest {path} cannot be read: {e.strerror or e}.") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise RigError(f"Avatar rig manifest {path} is not UTF-8 text (bad byte at offset {e.start}).") from None
    try:
        data = parse_json(text)
    except json.JSONDecodeError as e:
        raise RigError(f"Avatar rig manifest {path} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}.") from None
    except ValueError as e:
        raise RigError(f"Avatar rig manifest {path} cannot be read: {e}.") from None
    if not isinstance(data, dict):
        raise RigError(f"Avatar rig manifest {path} must hold a JSON object {{...}}, not {type(data).__name__}.")
    return data


def _check_canvas(where: str, canvas) -> tuple[int, int]:
    ok = (
        isinstance(canvas, list)
        and len(canvas) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) and 0 < n <= MAX_CANVAS for n in canvas)
    )
    if not ok:
        raise RigError(f'{where}: "canvas" must be [width, height] in whole pixels, 1 to {MAX_CANVAS}, not {canvas!r}.')
    return canvas[0], canvas[1]


def _check_file_table(where: str, table: str, value, required: tuple[str, ...]) -> dict[str, str]:
    if not isinstance(value, dict):
        raise RigError(f'{where}: "{table}" must be an object of name → image file, not {type(value).__name__}.')
    missing = [k for k in required if k not in value]
    if missing:
        raise RigError(f'{where}: "{table}" is missing {", ".join(map(repr, missing))}.')
    if required:
        unknown = sorted(set(value) - set(required))
        if unknown:
            raise RigError(f'{where}: "{table}" has unknown key(s) {", ".join(map(repr, unknown))}; expected {", ".join(required)}.')
    for key, rel in value.items():
        if not key.strip():
            raise RigError(f'{where}: "{table}" has an empty name.')
        if not isinstance(rel, str) or not rel.strip():
            raise RigError(f'{where}: {table} "{key}" must name an image file, not {rel!r}.')
    return value


def _check_visemes(where: str, value, mouths: dict[str, str]) -> dict[str, str]:
    if not isinstance(value, dict):
        raise RigError(f'{where}: "visemes" must be an object of viseme → mouth name, not {type(value).__name__}.')
    unknown = [v for v in value if v not in OVR_VISEMES]
    if unknown:
        raise RigError(
            f'{where}: "visemes" has unknown viseme(s) {", ".join(map(repr, unknown))}; '
            f"the OVR visemes are {', '.join(OVR_VISEMES)} (case matters)."
        )
    missing = [v for v in OVR_VISEMES if v not in value]
    if missing:
        raise RigError(f'{where}: "visemes" is missing {", ".join(map(repr, missing))}; every one of the 15 OVR visemes needs a mouth.')
    for viseme, mouth in value.items():
        if not isinstance(mouth, str) or mouth not in mouths:
            defined = ", ".join(map(repr, mouths))
            raise RigError(f'{where}: viseme "{viseme}" uses mouth {mouth!r}, which is not defined in "mouths" ({defined}).')
    return value


def _check_expressions(where: str, value) -> dict[str, dict]:
    """The manifest's expressions, in EXPRESSIONS' order, each with both keys filled."""
    if not isinstance(value, dict):
        raise RigError(f'{where}: "expressions" must be an object of expression name → '
                       f"its layers, not {type(value).__name__}.")
    unknown = [e for e in value if e not in EXPRESSIONS]
    if unknown:
        raise RigError(f'{where}: "expressions" has unknown expression(s) {", ".join(map(repr, unknown))}; '
                       f"the expressions are {', '.join(EXPRESSIONS)} (neutral is the layers themselves).")
    checked = {}
    for name in (e for e in EXPRESSIONS if e in value):
        spec = value[name]
        if not isinstance(spec, dict):
            raise RigError(f'{where}: expression "{name}" must be an object with "swap" and/or '
                           f'"overlays", not {type(spec).__name__}.')
        wrong = sorted(set(spec) - set(EXPRESSION_KEYS))
        if wrong:
            raise RigError(f'{where}: expression "{name}" has unknown key(s) {", ".join(map(repr, wrong))}; '
                           f'expected "swap" and/or "overlays".')
        swap = _check_file_table(where, f"expressions → {name} → swap", spec.get("swap", {}), required=())
        layers = sorted(set(swap) - set(LAYER_KEYS))
        if layers:
            raise RigError(f'{where}: expression "{name}" swaps {", ".join(map(repr, layers))}, which '
                           f"is not a layer; it can swap {', '.join(LAYER_KEYS)}.")
        overlays = spec.get("overlays", [])
        if not isinstance(overlays, list) or not all(isinstance(o, str) and o.strip() for o in overlays):
            raise RigError(f'{where}: expression "{name}" "overlays" must be a list of image files, '
                           f"not {overlays!r}.")
        if len(overlays) > MAX_OVERLAYS:
            raise RigError(f'{where}: expression "{name}" has {len(overlays)} overlays; at most '
                           f"{MAX_OVERLAYS} (merge some into one image).")
        if not swap and not overlays:
            raise RigError(f'{where}: expression "{name}" swaps no layer and adds no overlay, so it '
                           "would look neutral; give it a \"swap\" or \"overlays\".")
        checked[name] = {"swap": swap, "overlays": overlays}
    return checked


def _load_image(what: str, file: Path, canvas: tuple[int, int], out_size: tuple[int, int]) -> np.ndarray:
    try:
        found, regular = file.exists(), file.is_file()
    except OSError as e:  # a name too long for the file system, say
        raise RigError(f"{what}: cannot be read: {e.strerror or e}.") from None
    if not found:
        raise RigError(f"{what}: file not found.")
    if not regular:
        raise RigError(f"{what}: not a file.")
    try:
        data = file.read_bytes()
    except OSError as e:
        raise RigError(f"{what}: cannot be read: {e.strerror or e}.") from None
    if not data:
        raise RigError(f"{what}: the file is empty.")
    suffix = file.suffix.lower()
    if suffix == ".svg":
        image = _rasterise_svg(what, data, canvas, out_size)
    elif suffix == ".png":
        image = _decode_png(what, data, canvas, out_size)
    else:
        raise RigError(f"{what}: unsupported file type {file.suffix!r}; use .svg or .png.")
    return _to_array(image)


def _rasterise_svg(what: str, data: bytes, canvas: tuple[int, int], out_size: tuple[int, int]) -> QImage:
    from PySide6.QtCore import QByteArray, QCoreApplication, QRectF, Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    # Parsed here as well as by Qt because QSvgRenderer only says "invalid", while
    # expat names the line and column.
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise RigError(f"{what}: not a valid SVG file ({e}).") from None
    if _local_name(root.tag) != "svg":
        raise RigError(f"{what}: not an SVG file (the top element is <{_local_name(root.tag)}>).")
    if not isinstance(QCoreApplication.instance(), QGuiApplication) and any(
        _local_name(el.tag) in _SVG_TEXT_TAGS for el in root.iter()
    ):
        raise RigError(f"{what}: contains text; convert text to paths (Inkscape: Path → Object to Path).")
    renderer = QSvgRenderer(QByteArray(data))
    if not renderer.isValid():
        raise RigError(f"{what}: Qt could not read this SVG.")
    box = renderer.viewBoxF()
    if abs(box.width() - canvas[0]) > 0.5 or abs(box.height() - canvas[1]) > 0.5:
        raise RigError(
            f"{what}: drawing is {box.width():g}×{box.height():g}, but the canvas is {canvas[0]}×{canvas[1]}; "
            f'set the SVG viewBox to "0 0 {canvas[0]} {canvas[1]}".'
        )
    image = QImage(out_size[0], out_size[1], QImage.Format.Format_RGBA8888_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter, QRectF(0, 0, out_size[0], out_size[1]))
    painter.end()
    return image


def _decode_png(what: str, data: bytes, canvas: tuple[int, int], out_size: tuple[int, int]) -> QImage:
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage

    image = QImage()
    if not image.loadFromData(data, "PNG"):
        raise RigError(f"{what}: not a readable PNG image.")
    if (image.width(), image.height()) != canvas:
        raise RigError(f"{what}: image is {image.width()}×{image.height()}, but the canvas is {canvas[0]}×{canvas[1]}.")
    # Scaling with straight alpha would bleed the colour of transparent pixels into edges.
    image = image.convertToFormat(QImage.Format.Format_RGBA8888_Premultiplied)
    if out_size != canvas:
        image = image.scaled(out_size[0], out_size[1], Qt.AspectRatioMode.IgnoreAspectRatio, Qt.TransformationMode.SmoothTransformation)
    return image


def _to_array(image: QImage) -> np.ndarray:
    from PySide6.QtGui import QImage

    image = image.convertToFormat(QImage.Format.Format_RGBA8888)
    w, h = image.width(), image.height()
    rows = np.frombuffer(image.constBits(), np.uint8, count=image.sizeInBytes()).reshape(h, image.bytesPerLine())
    return rows[:, : w * 4].reshape(h, w, 4).copy()


def _local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
