"""Any avatar from a path: a sprite rig or a saved photo rig (manifest.json or its
folder), or a face picture imported on the spot. The one place that knows the kinds, so
the window, the settings and the video export treat every avatar alike."""

from __future__ import annotations

from pathlib import Path

from pipeline.core.avatar_state import EXPRESSIONS
from pipeline.core.json_text import parse_json
from render.gl.photo_renderer import PhotoRenderer
from render.gl.sprite_renderer import GLRenderer
from render.rigs.manifest import RigError
from render.rigs.photo import FORMAT as PHOTO_FORMAT
from render.rigs.photo import PhotoRig, import_portrait, load_photo_rig
from render.rigs.sprite import SpriteRig, load_rig

AvatarRig = SpriteRig | PhotoRig
PICTURE_SUFFIXES = (".png", ".jpg", ".jpeg")


def is_picture(path: str | Path) -> bool:
    return Path(path).suffix.lower() in PICTURE_SUFFIXES


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
    if _manifest_format(manifest) == PHOTO_FORMAT:
        return load_photo_rig(manifest)
    return load_rig(manifest)


def rig_expressions(rig: AvatarRig) -> tuple[str, ...]:
    """The expressions the avatar draws besides neutral, for AvatarMotion.set_offered: a
    sprite rig's own; a photo rig warps the face by every one of the state's weights."""
    return EXPRESSIONS if isinstance(rig, PhotoRig) else tuple(rig.expressions)


def renderer_for(rig: AvatarRig, clear_color: tuple[float, float, float, float]
                 ) -> GLRenderer | PhotoRenderer:
    """A renderer (GLRenderer's interface) that draws this kind of rig."""
    kind = PhotoRenderer if isinstance(rig, PhotoRig) else GLRenderer
    return kind(clear_color=clear_color)


def renderer_showing(renderer: GLRenderer | PhotoRenderer, rig: AvatarRig
                     ) -> GLRenderer | PhotoRenderer:
    """`renderer` showing `rig` now, or, where the rig is of the other kind, a renderer
    of that kind at the same viewport and clear colour, `renderer` released. The GL
    context both belong to must be current."""
    fresh = renderer_for(rig, renderer.clear_color)
    if type(fresh) is not type(renderer):
        renderer.release()
        fresh.initialize()
        fresh.resize(*renderer.viewport)
        renderer = fresh
    renderer.set_rig(rig)
    return renderer


def _manifest_format(path: Path) -> object:
    """The manifest's "format", or None where it has none: the sprite rig loader then
    explains what is wrong with the file."""
    try:
        data = parse_json(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):  # ValueError: not UTF-8, or not JSON
        return None
    return data.get("format") if isinstance(data, dict) else None
