"""render/rigs/sprite.py: the default sprite rig and the loader's handling of every way a
user rig can be broken."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST, REPO_ROOT
from pipeline.core.visemes import OVR_VISEMES, RHUBARB_SHAPE
from render.rigs.manifest import RigError
from render.rigs.sprite import SpriteRig, load_sprite_rig

DEFAULT_DIR = DEFAULT_AVATAR_MANIFEST.parent


@pytest.fixture(scope="module")
def rig() -> SpriteRig:
    return load_sprite_rig(DEFAULT_AVATAR_MANIFEST)


def _mouth_box(rig: SpriteRig) -> tuple[slice, slice]:
    """The union of every mouth drawing's opaque pixels."""
    alpha = np.zeros(rig.base.shape[:2], bool)
    for m in rig.mouths.values():
        alpha |= m[..., 3] > 0
    ys, xs = np.nonzero(alpha)
    return slice(ys.min(), ys.max() + 1), slice(xs.min(), xs.max() + 1)


def _over(dst: np.ndarray, src: np.ndarray) -> np.ndarray:
    a = src[..., 3:4] / 255.0
    return src[..., :3] * a + dst[..., :3] * (1 - a)


def test_default_rig_maps_all_ovr_visemes(rig):
    assert rig.name
    assert set(rig.viseme_to_mouth) == set(OVR_VISEMES)
    # Every viseme's drawing is one the rig has: the renderer looks it up by name.
    assert set(rig.viseme_to_mouth.values()) <= set(rig.mouths)
    assert rig.viseme_to_mouth["sil"] == "rest"
    assert rig.viseme_to_mouth["PP"] != rig.viseme_to_mouth["aa"]


def test_layers_are_canvas_sized_straight_rgba_and_not_empty(rig):
    assert rig.canvas_size == (512, 512)
    images = {"base": rig.base, "eyes_open": rig.eyes_open, "eyes_closed": rig.eyes_closed, **rig.mouths}
    for name, image in images.items():
        assert image.shape == (512, 512, 4), name
        assert image.dtype == np.uint8, name
        assert (image[..., 3] > 0).sum() > 100, f"{name} is (nearly) empty"
    # Straight alpha: faint antialiased edges of the dark outline keep its colour, while
    # premultiplied pixels could never be brighter than their alpha. (Alpha below 8 is left
    # out: those pixels lost their colour to 8-bit rounding in Qt's premultiplied painter.)
    faint = (rig.base[..., 3] >= 8) & (rig.base[..., 3] < 40)
    assert faint.sum() > 100
    assert (rig.base[faint][:, :3].max(axis=1) > rig.base[faint][:, 3]).all()


def test_base_has_transparent_background_and_covers_eyes_and_mouths(rig):
    for y, x in ((0, 0), (0, 511), (511, 0), (200, 10), (10, 256)):
        assert rig.base[y, x, 3] == 0, (y, x)
    # Every eye and mouth pixel must land on the opaque face, or it would float in the air.
    opaque = rig.base[..., 3] == 255
    for name, layer in {"eyes_open": rig.eyes_open, "eyes_closed": rig.eyes_closed, **rig.mouths}.items():
        drawn = layer[..., 3] > 0
        assert opaque[drawn].all(), f"{name} draws outside the face"


def test_at_least_nine_distinct_mouth_drawings(rig):
    ys, xs = _mouth_box(rig)
    face = rig.base[ys, xs].astype(float)
    composed = [_over(face, m[ys, xs].astype(float)) for m in rig.mouths.values()]
    distinct: list[np.ndarray] = []
    for image in composed:
        if all(np.abs(image - d).mean() > 8.0 for d in distinct):
            distinct.append(image)
    used = {rig.viseme_to_mouth[v] for v in OVR_VISEMES}
    assert len(distinct) >= 9
    assert len(used) >= 9


def test_every_pair_of_mouths_differs_in_the_mouth_region(rig):
    ys, xs = _mouth_box(rig)
    names = list(rig.mouths)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            pa, pb = rig.mouths[a][ys, xs].astype(int), rig.mouths[b][ys, xs].astype(int)
            changed = (np.abs(pa - pb).max(axis=2) > 40).mean()
            assert changed > 0.08, f"mouths {a!r} and {b!r} look alike ({changed:.1%} of the mouth area differs)"


def test_mouths_share_one_place_on_the_face(rig):
    centres = []
    for name, m in rig.mouths.items():
        ys, xs = np.nonzero(m[..., 3] > 0)
        centres.append((xs.mean(), ys.mean()))
        assert abs(xs.mean() - 256) < 3, f"{name} is off the face's centre line"
    cy = [c[1] for c in centres]
    assert max(cy) - min(cy) < 8


def test_the_default_rig_has_four_expressions_drawn_as_layers(rig):
    assert list(rig.expressions) == ["happy", "angry", "sad", "surprised"]
    for name, expression in rig.expressions.items():
        # Each gives the eyes (and brows, drawn with them) a look of its own.
        assert set(expression.swaps) == {"eyes_open", "eyes_closed"}, name
        for layer, image in expression.swaps.items():
            assert image.shape == (512, 512, 4) and image[..., 3].any(), (name, layer)
            assert not np.array_equal(image, getattr(rig, layer)), (name, layer)
        for overlay in expression.overlays:
            assert overlay.shape == (512, 512, 4) and overlay[..., 3].any(), name
    assert [len(e.overlays) for e in rig.expressions.values()] == [1, 1, 1, 0]


def test_a_rig_without_expressions_loads_with_none(tmp_path):
    folder = _copy_default(tmp_path)
    manifest = _manifest(folder)
    del manifest["expressions"]
    assert load_sprite_rig(_write(folder, manifest)).expressions == {}


def test_eyes_open_and_closed_differ(rig):
    assert (rig.eyes_open[..., 3] > 0).sum() > 3 * (rig.eyes_closed[..., 3] > 0).sum()


def test_size_scales_every_layer(rig):
    small = load_sprite_rig(DEFAULT_AVATAR_MANIFEST, size=128)
    assert small.canvas_size == (128, 128)
    assert small.base.shape == (128, 128, 4)
    assert all(m.shape == (128, 128, 4) for m in small.mouths.values())
    coarse = rig.base[::4, ::4, 3].astype(int)
    assert np.abs(small.base[..., 3].astype(int) - coarse).mean() < 20
    with pytest.raises(ValueError):
        load_sprite_rig(DEFAULT_AVATAR_MANIFEST, size=0)


def test_loading_a_folder_finds_its_manifest():
    assert load_sprite_rig(DEFAULT_DIR).source == DEFAULT_AVATAR_MANIFEST.resolve()


def test_loads_without_any_qt_application():
    """The loader's promise: no QGuiApplication is needed, and SVG text (which would
    abort Qt without one) is refused cleanly instead."""
    script = f"""
import sys, tempfile, pathlib, json, shutil
sys.path.insert(0, {str(REPO_ROOT)!r})
from PySide6.QtCore import QCoreApplication
from render.rigs.manifest import RigError
from render.rigs.sprite import load_sprite_rig
rig = load_sprite_rig({str(DEFAULT_AVATAR_MANIFEST)!r})
assert QCoreApplication.instance() is None
assert rig.base[..., 3].any()
d = pathlib.Path(tempfile.mkdtemp())
shutil.copytree({str(DEFAULT_DIR)!r}, d / "rig")
svg = (d / "rig" / "mouth_rest.svg").read_text().replace("</svg>", "<text x='9' y='9'>hi</text></svg>")
(d / "rig" / "mouth_rest.svg").write_text(svg)
try:
    load_sprite_rig(d / "rig" / "manifest.json")
except RigError as e:
    print("REFUSED:", e)
"""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "REFUSED:" in done.stdout and "text" in done.stdout


def test_png_layers_load_like_svg(rig, tmp_path):
    from PySide6.QtGui import QImage

    folder = _copy_default(tmp_path)
    rgba = np.ascontiguousarray(rig.mouths["wide"])
    QImage(rgba.data, 512, 512, 512 * 4, QImage.Format.Format_RGBA8888).save(str(folder / "wide.png"))
    manifest = _manifest(folder)
    manifest["mouths"]["wide"] = "wide.png"
    png_rig = load_sprite_rig(_write(folder, manifest))
    assert np.abs(png_rig.mouths["wide"].astype(int) - rgba.astype(int)).max() <= 1


# --- malformed rigs -------------------------------------------------------------------


def _copy_default(tmp_path: Path) -> Path:
    folder = tmp_path / "rig"
    shutil.copytree(DEFAULT_DIR, folder)
    return folder


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def _write(folder: Path, manifest: dict) -> Path:
    path = folder / "manifest.json"
    path.write_text(json.dumps(manifest))
    return path


def _error(path: Path) -> str:
    with pytest.raises(RigError) as caught:
        load_sprite_rig(path)
    return str(caught.value)


def test_manifest_not_found(tmp_path):
    assert "not found" in _error(tmp_path / "nowhere" / "manifest.json")


def test_manifest_not_json_names_line_and_column(tmp_path):
    folder = _copy_default(tmp_path)
    (folder / "manifest.json").write_text('{\n  "format": "lipsync-studio.sprite-rig",\n  "version": 1,,\n}')
    message = _error(folder / "manifest.json")
    assert "not valid JSON" in message and "line 3" in message and "column" in message


def test_manifest_not_utf8(tmp_path):
    folder = _copy_default(tmp_path)
    (folder / "manifest.json").write_bytes('{"name": "Zoë"}'.encode("latin-1"))
    assert "not UTF-8" in _error(folder / "manifest.json")


def test_manifest_not_an_object(tmp_path):
    folder = _copy_default(tmp_path)
    (folder / "manifest.json").write_text("[1, 2]")
    assert "JSON object" in _error(folder / "manifest.json")


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda m: m.update(format="other-tool.rig"), "other-tool.rig"),
        (lambda m: m.update(version=2), "version 2 is not supported"),
        (lambda m: m.update(version="1"), "whole number"),
        (lambda m: m.pop("visemes"), "missing key(s) 'visemes'"),
        (lambda m: m.pop("layers"), "missing key(s) 'layers'"),
        (lambda m: m.update(licence="CC0"), "unknown key(s) 'licence'"),
        (lambda m: m.update(name=""), '"name"'),
        (lambda m: m.update(canvas=[512]), '"canvas"'),
        (lambda m: m.update(canvas=[0, 512]), '"canvas"'),
        (lambda m: m["layers"].pop("eyes_closed"), "'eyes_closed'"),
        (lambda m: m.update(mouths={}), '"mouths" is empty'),
        (lambda m: m["visemes"].pop("aa"), "missing 'aa'"),
        (lambda m: m["visemes"].update(AA="wide"), "unknown viseme(s) 'AA'"),
        (lambda m: m["visemes"].update(ou="kiss"), "'kiss'"),
        (lambda m: m["mouths"].update(rest=""), 'mouths "rest"'),
        (lambda m: m.update(author=42), '"author"'),
        (lambda m: m.update(expressions=[]), '"expressions" must be an object'),
        (lambda m: m["expressions"].update(smug={"overlays": ["blush_happy.svg"]}),
         "unknown expression(s) 'smug'; the expressions are happy, angry, sad, relaxed, surprised"),
        (lambda m: m["expressions"].update(relaxed={}), 'expression "relaxed" swaps no layer'),
        (lambda m: m["expressions"].update(relaxed={"swap": {"mouth": "mouth_open.svg"}}),
         "swaps 'mouth', which is not a layer; it can swap base, eyes_open, eyes_closed"),
        (lambda m: m["expressions"].update(relaxed={"overlay": ["blush_happy.svg"]}),
         "unknown key(s) 'overlay'"),
        (lambda m: m["expressions"].update(relaxed={"overlays": "blush_happy.svg"}),
         '"overlays" must be a list of image files'),
        (lambda m: m["expressions"].update(relaxed={"overlays": ["blush_happy.svg"] * 5}),
         "has 5 overlays; at most 4"),
        (lambda m: m["expressions"]["happy"].update(overlays=["blush.svg"]),
         'expression happy overlays "1" (blush.svg): file not found'),
        (lambda m: m.update(expresions={}), "allowed keys are format, version, name, canvas, "
                                            "layers, mouths, visemes, license, author, expressions"),
    ],
)
def test_malformed_manifest_is_named(tmp_path, edit, expected):
    folder = _copy_default(tmp_path)
    manifest = _manifest(folder)
    edit(manifest)
    assert expected in _error(_write(folder, manifest))


def test_viseme_naming_undefined_mouth_says_which_viseme(tmp_path):
    folder = _copy_default(tmp_path)
    manifest = _manifest(folder)
    manifest["visemes"]["ou"] = "kiss"
    message = _error(_write(folder, manifest))
    assert 'viseme "ou"' in message and "not defined" in message


@pytest.mark.parametrize("rel", ["../outside.svg", "/etc/hostname", "sub/../../outside.svg"])
def test_path_escaping_the_rig_folder(tmp_path, rel):
    folder = _copy_default(tmp_path)
    shutil.copy(folder / "mouth_rest.svg", tmp_path / "outside.svg")
    manifest = _manifest(folder)
    manifest["mouths"]["rest"] = rel
    assert "outside the avatar folder" in _error(_write(folder, manifest))


def test_symlink_escaping_the_rig_folder(tmp_path):
    folder = _copy_default(tmp_path)
    shutil.copy(folder / "mouth_rest.svg", tmp_path / "outside.svg")
    (folder / "link.svg").symlink_to(tmp_path / "outside.svg")
    manifest = _manifest(folder)
    manifest["mouths"]["rest"] = "link.svg"
    assert "outside the avatar folder" in _error(_write(folder, manifest))


def test_missing_image_file(tmp_path):
    folder = _copy_default(tmp_path)
    (folder / "mouth_wide.svg").unlink()
    message = _error(folder / "manifest.json")
    assert "mouth_wide.svg" in message and "not found" in message


def test_empty_image_file(tmp_path):
    folder = _copy_default(tmp_path)
    (folder / "eyes_closed.svg").write_bytes(b"")
    message = _error(folder / "manifest.json")
    assert "eyes_closed" in message and "empty" in message


def test_unreadable_image_file(tmp_path, monkeypatch):
    # Patched rather than chmod-ed: the tests may run as root, who reads any file.
    folder = _copy_default(tmp_path)
    read_bytes = Path.read_bytes

    def denied(self: Path) -> bytes:
        if self.name == "base.svg":
            raise PermissionError(13, "Permission denied")
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    message = _error(folder / "manifest.json")
    assert "base.svg" in message and "cannot be read" in message and "Permission denied" in message


def test_image_that_is_a_folder(tmp_path):
    folder = _copy_default(tmp_path)
    (folder / "base.svg").unlink()
    (folder / "base.svg").mkdir()
    assert "not a file" in _error(folder / "manifest.json")


def test_broken_svg_names_the_line(tmp_path):
    folder = _copy_default(tmp_path)
    (folder / "mouth_round.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 512 512">\n<ellipse cx="1"\n</svg>')
    message = _error(folder / "manifest.json")
    assert "mouth_round.svg" in message and "not a valid SVG" in message and "line" in message


def test_not_an_svg_document(tmp_path):
    folder = _copy_default(tmp_path)
    (folder / "mouth_round.svg").write_text("<html><body>hello</body></html>")
    assert "<html>" in _error(folder / "manifest.json")


@pytest.mark.parametrize("name, content, expected", [
    ("wide.png", b"\x89PNG\r\n\x1a\n this is not really a png", "not a readable PNG"),
    ("wide.gif", b"GIF89a", "unsupported file type '.gif'"),
])
def test_a_mouth_image_that_cannot_be_read_is_named(tmp_path, name, content, expected):
    folder = _copy_default(tmp_path)
    (folder / name).write_bytes(content)
    manifest = _manifest(folder)
    manifest["mouths"]["wide"] = name
    assert expected in _error(_write(folder, manifest))


def test_svg_of_the_wrong_size(tmp_path):
    folder = _copy_default(tmp_path)
    svg = (folder / "mouth_open.svg").read_text().replace('viewBox="0 0 512 512"', 'viewBox="0 0 256 256"')
    (folder / "mouth_open.svg").write_text(svg)
    message = _error(folder / "manifest.json")
    assert "mouth_open.svg" in message and "256×256" in message and "512×512" in message


def test_png_of_the_wrong_size(tmp_path):
    from PySide6.QtGui import QImage

    folder = _copy_default(tmp_path)
    image = QImage(300, 200, QImage.Format.Format_RGBA8888)
    image.fill(0)
    image.save(str(folder / "base.png"))
    manifest = _manifest(folder)
    manifest["layers"]["base"] = "base.png"
    message = _error(_write(folder, manifest))
    assert "base.png" in message and "300×200" in message


def test_docs_table_matches_the_default_rig_and_rhubarb(rig):
    """docs/avatar-rig.md tells artists which drawing each viseme gets; keep it true."""
    rows = {}
    for line in (REPO_ROOT / "docs" / "avatar-rig.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].strip("`") in OVR_VISEMES:
            rows[cells[0].strip("`")] = (cells[3].split(":")[0].strip("`"), cells[4])
    assert set(rows) == set(OVR_VISEMES)
    for viseme, (drawing, shape) in rows.items():
        assert drawing == rig.viseme_to_mouth[viseme], viseme
        assert shape == RHUBARB_SHAPE[viseme], viseme


def test_the_docs_worked_example_loads_from_png_layers(tmp_path):
    """docs/avatar-rig.md's "Mochi", made of PNG layers of the size its manifest says."""
    from PySide6.QtGui import QImage

    text = (REPO_ROOT / "docs" / "avatar-rig.md").read_text()
    example = text[text.index("3. **Write `mochi/manifest.json`**"):]
    manifest = json.loads(example[example.index("{"):example.index("```", example.index("{"))])
    folder = tmp_path / "mochi"
    folder.mkdir()
    w, h = manifest["canvas"]
    files = {*manifest["layers"].values(), *manifest["mouths"].values(),
             *(f for e in manifest["expressions"].values()
               for f in (*e.get("swap", {}).values(), *e.get("overlays", [])))}
    for i, name in enumerate(sorted(files)):
        image = np.zeros((h, w, 4), np.uint8)
        image[100 + 20 * i: 140 + 20 * i, 300:700] = (200, 40 + 10 * i, 90, 255)
        QImage(image.data, w, h, 4 * w, QImage.Format.Format_RGBA8888).save(str(folder / name))
    (folder / "manifest.json").write_text(json.dumps(manifest))
    rig = load_sprite_rig(folder)
    assert rig.name == "Mochi" and list(rig.expressions) == ["happy"]
    assert rig.expressions["happy"].overlays[0].shape == (h, w, 4)
