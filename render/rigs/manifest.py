"""What every rig manifest shares, and the error a broken rig raises: kept apart from the
sprite rig's loader, which needs Qt to rasterise SVGs, so that photo rigs and their
renderers load without Qt (the GPU test machine has none)."""

from __future__ import annotations

from pathlib import Path


class RigError(Exception):
    """A rig that cannot be used; the message is meant for the user who made it."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def check_manifest_header(where: str, manifest: dict, fmt: str, version: int,
                          required: tuple[str, ...], optional: tuple[str, ...],
                          optional_other: tuple[str, ...] = ()) -> str:
    """What every rig manifest shares: its keys, "format", "version", "name" and optional
    texts (`optional`; `optional_other` are optional keys of other kinds, which the rig's
    loader checks). Returns the name; RigError says what is wrong."""
    missing = [k for k in required if k not in manifest]
    if missing:
        raise RigError(f"{where}: missing key(s) {', '.join(map(repr, missing))}.")
    unknown = sorted(set(manifest) - set(required) - set(optional) - set(optional_other))
    if unknown:
        allowed = ", ".join(required + optional + optional_other)
        raise RigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed keys are {allowed}.")
    if manifest["format"] != fmt:
        raise RigError(f'{where}: "format" is {manifest["format"]!r}, expected {fmt!r}.')
    found = manifest["version"]
    if isinstance(found, bool) or not isinstance(found, int):
        raise RigError(f'{where}: "version" must be a whole number, not {found!r}.')
    if found != version:
        raise RigError(f"{where}: format version {found} is not supported; this Lipsync Studio reads version {version}.")
    name = manifest["name"]
    if not isinstance(name, str) or not name.strip():
        raise RigError(f'{where}: "name" must be a non-empty text.')
    for key in optional:
        if key in manifest and not isinstance(manifest[key], str):
            raise RigError(f'{where}: "{key}" must be a text, not {manifest[key]!r}.')
    return name


def file_inside(where: str, what: str, folder: Path, rel: str) -> Path:
    """`rel` (a manifest's file name for `what`) resolved inside `folder` (resolved
    already). Rigs are shared between users: a manifest must not read files outside its
    folder. RigError for a name that is no file name or points outside."""
    try:
        file = (folder / rel).resolve()
    except (OSError, ValueError):  # a NUL in the name, a loop of links
        raise RigError(f"{where}: {what} is not a file name ({rel!r}).") from None
    if Path(rel).is_absolute() or not file.is_relative_to(folder):
        raise RigError(f"{where}: {what} points outside the avatar folder ({rel}); file names "
                       f"must be relative and stay inside {folder}.")
    return file
