"""Any avatar from a path: a sprite rig or a saved photo rig (manifest.json or its
folder), or a face picture imported on the spot. RIG_KINDS is the one table of the kinds
(manifest format → loader, renderers, expressions offered), so the window, the settings,
the library and the video export treat every avatar alike. Each kind has a renderer on
each mouth-frame path (render/gpu/mouth_path.py): OpenGL's, and CUDA's through CUDA-GL
interop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.avatar_state import EXPRESSIONS
from pipeline.core.json_text import parse_json
from render.gl.photo_renderer import PhotoRenderer, premultiply_picture
from render.gl.sprite_renderer import SpriteGLRenderer, premultiply_rig
from render.gpu.cuda_photo_renderer import CudaPhotoRenderer
from render.gpu.cuda_sprite_renderer import CudaSpriteRenderer
from render.gpu.mouth_path import CUDA, OPENGL
from render.rigs.manifest import RigError
from render.rigs.photo import PhotoRig, import_portrait
from render.rigs.photo_manifest import FORMAT as PHOTO_FORMAT
from render.rigs.photo_manifest import load_photo_rig
from render.rigs.sprite import FORMAT as SPRITE_FORMAT
from render.rigs.sprite import SpriteRig, load_sprite_rig

AvatarRig = SpriteRig | PhotoRig
AvatarRenderer = SpriteGLRenderer | PhotoRenderer | CudaSpriteRenderer | CudaPhotoRenderer
PICTURE_SUFFIXES = (".png", ".jpg", ".jpeg")


@dataclass(frozen=True)
class RigKind:
    name: str  # what the library records and the user reads: "sprite" or "photo"
    format: str  # the manifest's "format"
    rig: type
    load: Callable[[Path], AvatarRig]  # a manifest.json → its rig, or RigError
    renderer: type  # SpriteGLRenderer's interface
    cuda_renderer: type  # the same, its mouth frames made by CUDA (render/gpu/)
    # The expressions the avatar draws besides neutral, for AvatarMotion.set_offered.
    expressions: Callable[[AvatarRig], tuple[str, ...]]
    # What every renderer of the rig needs made from it alone, done ahead on any thread
    # (ready_to_draw), so that showing it leaves the GUI thread only GL work.
    ready: Callable[[AvatarRig], None]


SPRITE = RigKind("sprite", SPRITE_FORMAT, SpriteRig, load_sprite_rig, SpriteGLRenderer,
                 CudaSpriteRenderer, lambda rig: tuple(rig.expressions),  # the rig's own
                 premultiply_rig)
# A photo rig warps the face by every one of the state's weights. Of what its renderers
# make, only the picture's premultiplied copy comes from the rig alone; the rest of their
# set_rig is GL work.
PHOTO = RigKind("photo", PHOTO_FORMAT, PhotoRig, load_photo_rig, PhotoRenderer, CudaPhotoRenderer,
                lambda rig: EXPRESSIONS, premultiply_picture)
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


def ready_to_draw(rig: AvatarRig) -> AvatarRig:
    """`rig`, with what its renderers make from it alone made already (RigKind.ready):
    call it where the rig is read, off the GUI thread."""
    kind_of(rig).ready(rig)
    return rig


def rig_expressions(rig: AvatarRig) -> tuple[str, ...]:
    """The expressions the avatar draws besides neutral, for AvatarMotion.set_offered."""
    return kind_of(rig).expressions(rig)


def renderer_type(rig: AvatarRig, path: str = OPENGL) -> type:
    """The renderer class that draws this kind of rig on mouth-frame `path` (OPENGL or
    CUDA)."""
    kind = kind_of(rig)
    return {OPENGL: kind.renderer, CUDA: kind.cuda_renderer}[path]


def renderer_for(rig: AvatarRig, clear_color: tuple[float, float, float, float],
                 path: str = OPENGL) -> AvatarRenderer:
    """A renderer (SpriteGLRenderer's interface) that draws this kind of rig on `path`,
    not initialised yet."""
    return renderer_type(rig, path)(clear_color=clear_color)


def renderer_made(rig: AvatarRig, clear_color: tuple[float, float, float, float],
                  size: tuple[int, int], path: str = OPENGL) -> AvatarRenderer:
    """A renderer of the rig's kind on `path`, initialised, at `size` and showing `rig`,
    in the current GL context. Where it cannot be made (CudaError, for one), what it made
    is released and the error raised."""
    renderer = renderer_for(rig, clear_color, path)
    try:
        renderer.initialize()
        renderer.resize(*size)
        renderer.set_rig(rig)
    except BaseException:
        renderer.release()
        raise
    return renderer


def renderer_showing(renderer: AvatarRenderer, rig: AvatarRig, path: str = OPENGL) -> AvatarRenderer:
    """`renderer` showing `rig` now, or, where it is not the renderer of the rig's kind on
    `path`, a new one at the same viewport and clear colour (renderer_made), and then
    `renderer` released; where the new one cannot be made, `renderer` stays as it was.
    The GL context both belong to must be current."""
    if type(renderer) is renderer_type(rig, path):
        renderer.set_rig(rig)
        return renderer
    fresh = renderer_made(rig, renderer.clear_color, renderer.viewport, path)
    renderer.release()
    return fresh


def _read_manifest(path: Path) -> object:
    try:
        return parse_json(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):  # ValueError: not UTF-8, or not JSON
        return None
