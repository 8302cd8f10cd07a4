"""Any avatar from a path: a sprite rig or a saved photo rig (manifest.json or its
folder), or a face picture imported on the spot. RIG_KINDS is the one table of the kinds
(manifest format → loader, renderer, expressions offered), so the window, the settings,
the library and the video export treat every avatar alike."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.avatar_state import EXPRESSIONS
from pipeline.core.json_text import parse_json
from render.gl.photo_renderer import PhotoRenderer
from render.gl.sprite_renderer import SpriteGLRenderer
from render.rigs.manifest import RigError
from render.rigs.photo import PhotoRig, import_portrait
from render.rigs.photo_manifest import FORMAT as PHOTO_FORMAT
from render.rigs.photo_manifest import load_photo_rig
from render.rigs.sprite import FORMAT as SPRITE_FORMAT
from render.rigs.sprite import SpriteRig, load_sprite_rig

AvatarRig = SpriteRig | PhotoRig
AvatarRenderer = SpriteGLRenderer | PhotoRenderer
PICTURE_SUFFIXES = (".png", ".jpg", ".jpeg")


@dataclass(frozen=True)
class RigKind:
    name: str  # what the library records and the user reads: "sprite" or "photo"
    format: str  # the manifest's "format"
    rig: type
    load: Callable[[Path], AvatarRig]  # a manifest.json → its rig, or RigError
    renderer: type  # SpriteGLRenderer's interface
    # The expressions the avatar draws besides neutral, for AvatarMotion.set_offered.
    expressions: Callable[[AvatarRig], tuple[str, ...]]


SPRITE = RigKind("sprite", SPRITE_FORMAT, SpriteRig, load_sprite_rig, SpriteGLRenderer,
                 lambda rig: tuple(rig.expressions))  # the rig's own
# A photo rig warps the face by every one of the state's weights.
PHOTO = RigKind("photo", PHOTO_FORMAT, PhotoRig, load_photo_rig, PhotoRenderer, lambda rig: EXPRESSIONS)
RIG_KINDS = (SPRITE, PHOTO)


def is_picture(path: str | Path) -> bool:
    return Path(path).suffix.lower() in PICTURE_SUFFIXES


def kind_of(rig: AvatarRig) -> RigKind:
    """The rig's kind. The sprite renderer draws anything of a sprite rig's shape
    (SpriteRigLike: a test's or a benchmark's made-up rig too), so that is the rest."""
    return next((kind for kind in RIG_KINDS if isinstance(rig, kind.rig)), SPRITE)


def manifest_kind(manifest: Path) -> RigKind | None:
    """The kind whose format the manifest names, or None where it is unreadable or names
    none of them."""
    data = _read_manifest(manifest)
    found = data.get("format") if isinstance(data, dict) else None
    return next((kind for kind in RIG_KINDS if kind.format == found), None)


def load_avatar_rig(path: str | Path) -> AvatarRig:
    """The rig at `path`. RigError (a missing or broken rig) or PortraitError (a picture
    with no usable face) say what is wrong, in words for the user."""
    path = Path(path)
    try:
        if not path.exists():
            raise RigError(f"Avatar not found: {path}.")
        if is_picture(path):
            return import_portrait(path)
        manifest = path / "manifest.json" if path.is_dir() else path
        # A device or a pipe would be read forever (/dev/zero) or wait for a writer.
        if manifest.exists() and not manifest.is_file():
            raise RigError(f"Avatar {manifest} is not a file.")
    except OSError as exc:  # a name too long for the file system, say
        raise RigError(f"Avatar {path} cannot be read: {exc.strerror or exc}.") from None
    # A manifest of no known format: the sprite rig loader explains what is wrong with it.
    return (manifest_kind(manifest) or SPRITE).load(manifest)


def rig_expressions(rig: AvatarRig) -> tuple[str, ...]:
    """The expressions the avatar draws besides neutral, for AvatarMotion.set_offered."""
    return kind_of(rig).expressions(rig)


def renderer_for(rig: AvatarRig, clear_color: tuple[float, float, float, float]) -> AvatarRenderer:
    """A renderer (SpriteGLRenderer's interface) that draws this kind of rig."""
    return kind_of(rig).renderer(clear_color=clear_color)


def renderer_showing(renderer: AvatarRenderer, rig: AvatarRig) -> AvatarRenderer:
    """`renderer` showing `rig` now, or, where the rig is of the other kind, a renderer
    of that kind at the same viewport and clear colour, `renderer` released. The GL
    context both belong to must be current."""
    if type(renderer) is not kind_of(rig).renderer:
        fresh = renderer_for(rig, renderer.clear_color)
        renderer.release()
        fresh.initialize()
        fresh.resize(*renderer.viewport)
        renderer = fresh
    renderer.set_rig(rig)
    return renderer


def _read_manifest(path: Path) -> object:
    try:
        return parse_json(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):  # ValueError: not UTF-8, or not JSON
        return None
