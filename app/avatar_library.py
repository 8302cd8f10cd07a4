"""The avatar library: every avatar the user has, the bundled one first, in one file.

Photo rigs made by the portrait import live in the library's folder (the config folder's
avatars/, one folder each); sprite rigs stay wherever their maker keeps them and are
only pointed to. The list is kept in avatars/library.json (versioned, written atomically
by app/config_files.py), each entry with its name, kind, where its manifest is, its own
voice and speaker, and for imported pictures the picture's SHA-256 and the face chosen,
so importing the same picture again reuses the rig. Thumbnails are cached beside it in
avatars/.thumbnails/.

Which avatar is in use is not kept here: the settings' avatar_manifest says so (None:
the bundled one), and the library only answers which entry that is.

Invariants: the bundled avatar is always the first entry and can be neither renamed nor
removed; names are unique regardless of case; an entry whose folder disappeared stays
listed (`missing`) until the user removes it. Every change re-reads the file first and
writes it whole, so the app and `lipsync-studio avatars` may both change it.

Holds no widgets, so the window, the CLI and the API share it; thumbnails of sprite rigs
are rasterised by the sprite rig loader (Qt's raster code, no display needed).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from PIL import Image

from app.config_files import read_json, write_json
from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
from pipeline.face.landmarks import (
    FaceLandmarker,
    SeveralFacesError,
    animatable,
    find_face,
    load_portrait,
)
from render.rigs.loader import (PHOTO, RIG_KINDS, SPRITE, AvatarRig, load_avatar_rig, manifest_kind,
                                ready_to_draw)
from render.rigs.manifest import RigError
from render.rigs.photo import PhotoRig, build_photo_rig
from render.rigs.photo_manifest import MANIFEST, load_photo_rig, save_photo_rig
from render.rigs.sprite import load_sprite_rig

LIBRARY_FILE = "library.json"
LIBRARY_VERSION = 1
THUMBNAILS = ".thumbnails"
THUMBNAIL_PX = 128
BUNDLED_NAME = "Bundled avatar"
SETTINGS_VOICE = "the settings' voice"  # what an avatar of no voice of its own speaks with
MAX_NAME = 64
# A face fills about half its thumbnail: the box of its landmarks padded by this much of
# its larger side on every side (astronaut(): forehead to chin and both ears in view).
FACE_PAD = 0.35


class LibraryError(Exception):
    """A request the library cannot do (an unknown name, a name taken); the message is
    for the user."""


class FacesToChoose(SeveralFacesError):
    """SeveralFacesError with the decoded picture, so a window can show the faces."""

    def __init__(self, cause: SeveralFacesError, image: np.ndarray) -> None:
        super().__init__(cause.message, cause.boxes)
        self.image = image


@dataclass(frozen=True)
class Avatar:
    name: str
    kind: str  # a RigKind's name: "photo" or "sprite"
    manifest: Path
    voice: str | None = None  # a voice's name in the catalogue (app/voices.py); None: the settings' voice
    voice_speaker: int = 0
    # For photo rigs made from a picture: the picture file's SHA-256, the face chosen
    # (numbered from 0, left to right) and how many faces it showed.
    picture_sha256: str | None = None
    face: int | None = None
    faces: int | None = None

    @property
    def bundled(self) -> bool:
        return self.manifest == DEFAULT_AVATAR_MANIFEST

    @property
    def missing(self) -> bool:
        return not self.manifest.is_file()

    @property
    def setting(self) -> str | None:
        """What the settings' avatar_manifest holds while this avatar is in use."""
        return None if self.bundled else str(self.manifest)

    @property
    def voice_label(self) -> str:
        if self.voice is None:
            return SETTINGS_VOICE
        return self.voice + (f" (speaker {self.voice_speaker})" if self.voice_speaker else "")

    @property
    def missing_message(self) -> str:
        return (f"{self.name} is missing: its folder {self.manifest.parent} is gone (moved, "
                "renamed or deleted). Put it back there, or remove it from the library.")


def read_avatar(setting: str | None) -> AvatarRig:
    """The avatar a setting names (None: the bundled one), read, built and ready to draw
    (ready_to_draw); RigError or PortraitError when it cannot be. Safe on any thread: it
    only reads files and computes."""
    return ready_to_draw(load_avatar_rig(Path(setting) if setting else DEFAULT_AVATAR_MANIFEST))


BUNDLED = Avatar(BUNDLED_NAME, SPRITE.name, DEFAULT_AVATAR_MANIFEST)


@dataclass(frozen=True)
class Imported:
    avatar: Avatar
    rig: PhotoRig
    reused: bool  # the picture had been imported before: its rig was loaded, not made


@dataclass(frozen=True)
class Removed:
    avatar: Avatar
    files_deleted: bool  # a photo rig's folder went too; a sprite rig's files are the user's

    @property
    def message(self) -> str:
        if self.files_deleted:
            return f"Deleted {self.avatar.name} and its folder {self.avatar.manifest.parent}."
        return (f"Removed {self.avatar.name} from the library; its files in "
                f"{self.avatar.manifest.parent} are left as they were.")


def voice_of(avatar: Avatar | None, voice: str | None, speaker: int) -> tuple[str | None, int]:
    """The voice and speaker to speak with: the avatar's own where it has one, else the
    settings' (`voice`, `speaker`: Settings.voice and voice_speaker)."""
    if avatar is not None and avatar.voice is not None:
        return avatar.voice, avatar.voice_speaker
    return voice, speaker


def picture_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class AvatarLibrary:
    """The library kept in `folder`/library.json (`folder`: the config folder's avatars/).

    Opening it the first time (no library file yet) adopts every rig already in the
    folder. `problems` lists what could not be read from the file, for the user."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder).absolute()
        self.path = self.folder / LIBRARY_FILE
        self.problems: list[str] = []
        self._lock = threading.RLock()
        self._stamp: tuple[int, int] | None = None
        self._avatars: tuple[Avatar, ...] = (BUNDLED,)
        try:
            if self.path.exists():
                self._read()
            else:
                self._adopt_folder()
        except OSError as exc:
            # The avatars are still listed; changes fail with the same reason.
            self.problems.append(f"The avatar library {self.path} could not be written "
                                 f"({exc.strerror or exc}): changes to it will not be kept.")

    # -- reading --------------------------------------------------------------------

    @property
    def avatars(self) -> tuple[Avatar, ...]:
        """Every avatar in library order, the bundled one first."""
        with self._lock:
            self._read_if_changed()
            return self._avatars

    def named(self, name: str) -> Avatar:
        """The avatar called `name` (any case); LibraryError lists the names otherwise."""
        wanted = name.strip().casefold()
        for avatar in self.avatars:
            if avatar.name.casefold() == wanted:
                return avatar
        names = ", ".join(repr(a.name) for a in self.avatars)
        raise LibraryError(f"No avatar is called {name!r}; the library has {names}.")

    def in_use(self, setting: str | None) -> Avatar | None:
        """The entry for the settings' avatar_manifest (None: the bundled one); None where
        the avatar in use is not in the library (a picture opened directly)."""
        if not setting:
            return self.avatars[0]
        wanted = _manifest_of(Path(setting))
        return next((a for a in self.avatars if a.manifest == wanted), None)

    def step(self, setting: str | None, by: int) -> Avatar:
        """The avatar `by` places after (negative: before) the one in use, in library
        order, wrapping around and passing over missing ones: next/previous avatar. From
        an avatar outside the library, the first step lands on the bundled one."""
        usable = [a for a in self.avatars if not a.missing]
        current = self.in_use(setting)
        if current not in usable:
            return usable[0] if by > 0 else usable[-1]
        return usable[(usable.index(current) + by) % len(usable)]

    def made_from(self, sha256: str, face_index: int | None) -> Avatar | None:
        """The photo avatar made before from the picture with this hash and this face
        (`face_index` None: a picture that showed one face), missing or not."""
        for avatar in self.avatars:
            if avatar.picture_sha256 == sha256 and (
                    face_index == avatar.face or face_index is None and avatar.faces == 1):
                return avatar
        return None

    # -- changing -------------------------------------------------------------------

    def adopt(self, manifest: Path) -> Avatar:
        """The entry for the rig at `manifest` (its folder or manifest.json), added at the
        end where it is not in the library yet. RigError where it is no rig."""
        manifest = _manifest_of(Path(manifest))
        with self._lock:
            self._read_if_changed()
            for avatar in self._avatars:
                if avatar.manifest == manifest:
                    return avatar
            kind = manifest_kind(manifest)
            if kind is None:
                raise RigError(f"{manifest} is not an avatar rig's manifest.")
            name = _rig_name(manifest) or manifest.parent.name
            avatar = Avatar(self._free_name(name), kind.name, manifest)
            self._write(self._avatars + (avatar,))
            return avatar

    def rename(self, avatar: Avatar, name: str) -> Avatar:
        if avatar.bundled:
            raise LibraryError(f"The {BUNDLED_NAME.lower()} keeps its name.")
        with self._lock:
            self._read_if_changed()
            return self._replace(avatar, name=self._checked_name(name, avatar.manifest))

    def set_voice(self, avatar: Avatar, voice: str | None, speaker: int = 0) -> Avatar:
        """The voice this avatar speaks with from now on (None: the settings' voice)."""
        with self._lock:
            return self._replace(avatar, voice=voice, voice_speaker=speaker)

    def deletes_files(self, avatar: Avatar) -> bool:
        """Whether removing `avatar` deletes its folder: a photo rig the import made in
        the library's folder."""
        folder = avatar.manifest.parent
        return avatar.kind == PHOTO.name and folder.parent == self.folder and folder.is_dir()

    def remove(self, avatar: Avatar) -> Removed:
        """Take `avatar` out of the library. A photo rig in the library's folder is
        deleted with it (the import made it, and can make it again from the picture); a
        sprite rig's files, the user's own work, are never touched."""
        if avatar.bundled:
            raise LibraryError(f"The {BUNDLED_NAME.lower()} cannot be removed.")
        with self._lock:
            self._read_if_changed()
            self._find(avatar)
            owned = self.deletes_files(avatar)
            if owned:
                shutil.rmtree(avatar.manifest.parent)
            self._write(tuple(a for a in self._avatars if a.manifest != avatar.manifest))
            for old in self._thumbnails_of(avatar.manifest):
                old.unlink(missing_ok=True)
            return Removed(avatar, owned)

    def import_picture(self, picture: Path, face_index: int | None,
                       landmarker: Callable[[], FaceLandmarker], *, name: str | None = None,
                       on_rig: Callable[[PhotoRig, bool], None] = lambda rig, reused: None
                       ) -> Imported:
        """Make the face in `picture` an avatar and add it, or reuse the rig made before
        from the same picture and face; one made before whose folder is gone is made again
        in its entry (its name and voice kept). `on_rig` gets the rig, and whether it is
        the one from before, before it is saved (saving a large picture takes a while: the
        window shows it first). Raises PortraitError (FacesToChoose where `face_index`
        must be given), LibraryError, OSError."""
        picture = Path(picture)
        try:
            sha256 = picture_sha256(picture)
        except OSError:
            sha256 = None  # load_portrait says what is wrong with the file
        before = self.made_from(sha256, face_index) if sha256 else None
        if before is not None and not before.missing:
            rig = load_photo_rig(before.manifest)
            on_rig(rig, True)
            self._thumbnail_from(before, rig)
            return Imported(before, rig, reused=True)
        image = load_portrait(picture)
        faces = landmarker().detect(image)
        try:
            face = find_face(faces, picture.name, face_index)
        except SeveralFacesError as exc:
            raise FacesToChoose(exc, image) from None
        label = before.name if before is not None else self._new_name(name or picture.stem,
                                                                      given=name is not None)
        rig = build_photo_rig(image, face.points, label, source=picture)
        on_rig(rig, False)
        folder = _free_folder(self.folder, picture.stem)
        try:
            manifest = save_photo_rig(rig, folder)
        except OSError as exc:
            # Half a rig (a full disk) is no avatar, and would take the picture's folder
            # name from the next import: none of it stays, and the error names it.
            shutil.rmtree(folder, ignore_errors=True)
            raise OSError(exc.errno, exc.strerror, str(folder)) from exc
        with self._lock:
            self._read_if_changed()
            if before is not None:
                avatar = self._replace(before, manifest=manifest)
            else:
                avatar = Avatar(label, PHOTO.name, manifest, picture_sha256=sha256,
                                face=face_index or 0, faces=len(animatable(faces)))
                self._write(self._avatars + (avatar,))
        self._thumbnail_from(avatar, rig)
        return Imported(avatar, rig, reused=False)

    def _thumbnail_from(self, avatar: Avatar, rig: PhotoRig) -> None:
        """The thumbnail while the rig is loaded anyway, so no window waits for it."""
        if self.cached_thumbnail(avatar) is None:
            try:
                self._save_thumbnail(avatar, rig)
            except OSError:
                pass  # the avatar is saved; thumbnail() makes it, or says why not, when asked

    def _new_name(self, name: str, given: bool) -> str:
        """`name` for a new avatar: a name given must be free; a picture's file name is
        numbered where it is taken (room left for " 99")."""
        with self._lock:
            self._read_if_changed()
            if given:
                return self._checked_name(name)
            return self._free_name(name.strip()[:MAX_NAME - 3] or "portrait")

    def _checked_name(self, name: str, manifest: Path | None = None) -> str:
        """`name` stripped; LibraryError where it is empty, too long, or another avatar's
        than the one at `manifest`."""
        name = name.strip()
        if not name or len(name) > MAX_NAME:
            raise LibraryError(f"An avatar's name must be 1 to {MAX_NAME} characters long.")
        if name.casefold() in {a.name.casefold() for a in self._avatars if a.manifest != manifest}:
            raise LibraryError(f"Another avatar is already called {name!r}.")
        return name

    # -- thumbnails -----------------------------------------------------------------

    def thumbnail(self, avatar: Avatar) -> Path:
        """A THUMBNAIL_PX square PNG of the avatar, made once per version of its manifest
        and kept in the thumbnails folder: loading a large photo rig to make one takes
        seconds (1.5 s for a 4000² portrait here), so a window asks off its GUI thread.
        RigError or PortraitError where the rig cannot be read (a missing one raises
        RigError with its missing_message), OSError where it cannot be saved."""
        path = self.cached_thumbnail(avatar)
        if path is None:
            if avatar.missing:
                raise RigError(avatar.missing_message)
            rig = load_photo_rig(avatar.manifest) if avatar.kind == PHOTO.name else None
            path = self._save_thumbnail(avatar, rig)
        return path

    def cached_thumbnail(self, avatar: Avatar) -> Path | None:
        """The thumbnail already made for this version of the rig, or None: no waiting."""
        try:
            path = self._thumbnail_path(avatar.manifest)
        except OSError:
            return None
        return path if path.exists() else None

    def _save_thumbnail(self, avatar: Avatar, rig: PhotoRig | None) -> Path:
        """The thumbnail from the photo rig `rig` (or, for a sprite rig, its manifest)."""
        picture = _face_crop(rig) if rig is not None else sprite_picture(avatar.manifest)
        path = self._thumbnail_path(avatar.manifest)
        for old in self._thumbnails_of(avatar.manifest):
            old.unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Its own temporary name: the import's thread and a window's may make it at once.
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        picture.save(tmp, format="PNG")
        tmp.replace(path)
        return path

    def _thumbnail_path(self, manifest: Path) -> Path:
        # Named for the manifest's place and version: a rig changed on disk gets a new one.
        return self.folder / THUMBNAILS / f"{_key(manifest)}-{manifest.stat().st_mtime_ns}.png"

    def _thumbnails_of(self, manifest: Path) -> list[Path]:
        return list((self.folder / THUMBNAILS).glob(f"{_key(manifest)}-*.png"))

    # -- the file -------------------------------------------------------------------

    def _find(self, avatar: Avatar) -> int:
        for index, known in enumerate(self._avatars):
            if known.manifest == avatar.manifest:
                return index
        raise LibraryError(f"{avatar.name} is not in the library (any more).")

    def _replace(self, avatar: Avatar, **changes) -> Avatar:
        self._read_if_changed()
        index = self._find(avatar)
        changed = replace(self._avatars[index], **changes)
        self._write(self._avatars[:index] + (changed,) + self._avatars[index + 1:])
        return changed

    def _free_name(self, name: str) -> str:
        return _free_name(name, {a.name.casefold() for a in self._avatars})

    def _adopt_folder(self) -> None:
        """First run: every rig already in the folder joins, oldest first."""
        found = []
        if self.folder.is_dir():
            for manifest in self.folder.glob(f"*/{MANIFEST}"):
                kind = manifest_kind(manifest)
                if kind is not None:
                    found.append((manifest.stat().st_mtime, manifest, kind.name))
        avatars = [BUNDLED]
        for _, manifest, kind in sorted(found):
            name = _free_name(_rig_name(manifest) or manifest.parent.name,
                              {a.name.casefold() for a in avatars})
            avatars.append(Avatar(name, kind, manifest.absolute()))
        self._avatars = tuple(avatars)
        self._write(self._avatars)

    def _read_if_changed(self) -> None:
        if self._file_stamp() != self._stamp:
            self._read()

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def _read(self) -> None:
        self.problems = []
        self._stamp = self._file_stamp()
        data = read_json(self.path)
        if not isinstance(data, dict) or not isinstance(data.get("avatars"), list):
            kept = self.path.with_name(f"{self.path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}")
            self.path.replace(kept)
            self.problems.append(f"The avatar library {self.path} could not be read; it is kept "
                                 f"as {kept.name} and the avatars in {self.folder} are listed anew.")
            self._adopt_folder()
            return
        if data.get("version") != LIBRARY_VERSION:
            self.problems.append(f"The avatar library {self.path} is of version "
                                 f"{data.get('version')!r}, not {LIBRARY_VERSION}: read what fits.")
        avatars = [BUNDLED]
        for number, entry in enumerate(data["avatars"], 1):
            try:
                avatar = self._from_json(entry)
            except (KeyError, TypeError, ValueError):
                self.problems.append(f"Entry {number} of the avatar library {self.path} is "
                                     "not an avatar; it is left out.")
                continue
            if avatar.bundled:
                avatars[0] = replace(BUNDLED, voice=avatar.voice, voice_speaker=avatar.voice_speaker)
            elif all(a.name.casefold() != avatar.name.casefold() for a in avatars):
                avatars.append(avatar)
            else:
                self.problems.append(f"The avatar library {self.path} names two avatars "
                                     f"{avatar.name!r}; the second is left out.")
        self._avatars = tuple(avatars)

    def _from_json(self, entry: dict) -> Avatar:
        if entry.get("bundled") is True:
            return replace(BUNDLED, voice=_optional(entry, "voice", str),
                           voice_speaker=_whole(entry.get("voice_speaker", 0)))
        name, kind, where = entry["name"], entry["kind"], entry["path"]
        if not (isinstance(name, str) and name.strip() and kind in {k.name for k in RIG_KINDS}
                and isinstance(where, str) and where):
            raise ValueError(entry)
        picture = entry.get("picture")
        sha256 = face = faces = None
        if picture is not None:
            sha256, face, faces = str(picture["sha256"]), _whole(picture["face"]), _whole(picture["faces"])
        return Avatar(name.strip(), kind, (self.folder / where).absolute(),
                      _optional(entry, "voice", str), _whole(entry.get("voice_speaker", 0)),
                      sha256, face, faces)

    def _to_json(self, avatar: Avatar) -> dict:
        if avatar.bundled:
            return {"bundled": True, "voice": avatar.voice, "voice_speaker": avatar.voice_speaker}
        # Inside the folder relative to it, so the config folder can be moved whole.
        try:
            where = str(avatar.manifest.relative_to(self.folder))
        except ValueError:
            where = str(avatar.manifest)
        entry = {"name": avatar.name, "kind": avatar.kind, "path": where,
                 "voice": avatar.voice, "voice_speaker": avatar.voice_speaker}
        if avatar.picture_sha256 is not None:
            entry["picture"] = {"sha256": avatar.picture_sha256, "face": avatar.face,
                                "faces": avatar.faces}
        return entry

    def _write(self, avatars: tuple[Avatar, ...]) -> None:
        """Raises OSError, the file and the list as they were, where it cannot be written."""
        write_json(self.path, {"version": LIBRARY_VERSION,
                               "avatars": [self._to_json(a) for a in avatars]})
        self._avatars = avatars
        self._stamp = self._file_stamp()


def _manifest_of(path: Path) -> Path:
    path = path.absolute()
    return path / MANIFEST if path.is_dir() else path


def _rig_name(manifest: Path) -> str | None:
    data = read_json(manifest)
    name = data.get("name") if isinstance(data, dict) else None
    return name.strip()[:MAX_NAME] if isinstance(name, str) and name.strip() else None


def _free_name(name: str, taken: set[str]) -> str:
    """`name`, or "name 2", "name 3" … where it is taken (casefolded names)."""
    candidate, n = name, 1
    while candidate.casefold() in taken:
        n += 1
        candidate = f"{name} {n}"
    return candidate


def _optional(entry: dict, key: str, kind: type):
    value = entry.get(key)
    if value is not None and not isinstance(value, kind):
        raise TypeError(key)
    return value


def _whole(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(value)
    return value


def _key(manifest: Path) -> str:
    return hashlib.sha1(str(manifest).encode("utf-8")).hexdigest()[:16]


def _free_folder(parent: Path, stem: str) -> Path:
    """parent/stem, or parent/stem-2, -3 … if taken: an import never overwrites a rig
    that the settings or the library point at."""
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in stem) or "portrait"
    folder, n = parent / name, 1
    while folder.exists():
        n += 1
        folder = parent / f"{name}-{n}"
    return folder


def _face_crop(rig: PhotoRig) -> Image.Image:
    (x0, y0), (x1, y1) = rig.landmarks[:, :2].min(axis=0), rig.landmarks[:, :2].max(axis=0)
    side = max(x1 - x0, y1 - y0) * (1 + 2 * FACE_PAD)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    box = tuple(int(round(v)) for v in (cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2))
    # Past the picture's edges the crop is transparent (PIL pads with zeros).
    crop = Image.fromarray(rig.image, "RGBA").crop(box)
    return crop.resize((THUMBNAIL_PX, THUMBNAIL_PX), Image.Resampling.LANCZOS)


def sprite_picture(manifest: Path, size: int = THUMBNAIL_PX) -> Image.Image:
    """The rig at rest (base, open eyes, the mouth for silence), letterboxed into a
    size×size square (the library's thumbnails; packaging/make_icons.py's app icon)."""
    rig = load_sprite_rig(manifest, size=size)
    picture = Image.fromarray(rig.base, "RGBA")
    for layer in (rig.eyes_open, rig.mouths[rig.viseme_to_mouth["sil"]]):
        picture = Image.alpha_composite(picture, Image.fromarray(np.ascontiguousarray(layer), "RGBA"))
    square = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    square.paste(picture, ((size - picture.width) // 2, (size - picture.height) // 2))
    return square
