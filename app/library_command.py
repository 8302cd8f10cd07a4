"""`lipsync-studio avatars list|import|use|rename|remove|voice`: the avatar library from a
terminal.

The same library the window shows (app/avatar_library.py). Each command prints what it
did, a line each; an error is one line (or a line and the faces to choose from) on
stderr, exit status 1. `use` and `remove` change the settings' avatar, which a running
app reads at its next start.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from app.command_line import fail, saved_settings

# The library (PIL, the rig loaders, Qt's raster code: ~0.1 s here) loads when an
# `avatars` command runs, not whenever the command line is parsed.


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add `avatars` and its sub-commands to ``subparsers``; returns the `avatars` parser."""
    avatars = subparsers.add_parser(
        "avatars", help="the avatar library: list, import, use, rename, remove; opens no window",
        description="Every avatar you imported or added, the bundled one first, as the "
        "window's avatar library shows them.")
    commands = avatars.add_subparsers(dest="avatars_command", metavar="COMMAND", required=True)
    commands.add_parser("list", help="each avatar: name, kind, where it is, its voice, the one in use")
    picture = commands.add_parser(
        "import", help="make the face in a picture an avatar (a picture imported before "
        "gives back its avatar)")
    picture.add_argument("picture", type=Path, help="a PNG or JPEG with a face")
    picture.add_argument("--face", type=int, metavar="N",
                         help="which face talks, where the picture shows several (numbered "
                         "from 0, left to right; without it they are listed)")
    picture.add_argument("--name", help="the avatar's name (default: the picture's file name)")
    use = commands.add_parser("use", help="make NAME the avatar")
    use.add_argument("name")
    rename = commands.add_parser("rename", help="call OLD NEW from now on")
    rename.add_argument("old")
    rename.add_argument("new")
    remove = commands.add_parser(
        "remove", help="take NAME out of the library (an imported photo avatar's folder is "
        "deleted; a sprite rig's files are left)")
    remove.add_argument("name")
    voice = commands.add_parser(
        "voice", help="the voice NAME speaks with (a character keeps its voice)",
        description="Give the avatar NAME a voice of its own ('lipsync-studio voices' lists "
        "them); without VOICE it speaks with the voice chosen in the settings.")
    voice.add_argument("name")
    voice.add_argument("voice", nargs="?", help="a voice's name or the path of its .onnx")
    voice.add_argument("--speaker", type=int, default=0, metavar="N",
                       help="which speaker of a multi-speaker voice (numbered from 0)")
    return avatars


def run(args: argparse.Namespace) -> int:
    """Run the parsed `avatars` command: 0 when done, 1 with the message on stderr."""
    from app.avatar_library import AvatarLibrary, LibraryError
    from app.settings import SettingsStore, config_dir
    from pipeline.face.landmarks import PortraitError, SeveralFacesError
    from pipeline.voice.voice_files import VoiceError
    from render.rigs.manifest import RigError

    library = AvatarLibrary(config_dir() / "avatars")
    for problem in library.problems:
        print(f"lipsync-studio: {problem}", file=sys.stderr)
    store = SettingsStore()
    try:
        if args.avatars_command == "list":
            _list(library, store.load().avatar_manifest)
        elif args.avatars_command == "import":
            _import(library, args)
        elif args.avatars_command == "use":
            _use(library, store, args.name)
        elif args.avatars_command == "rename":
            old = library.named(args.old)
            print(f"{old.name} is called {library.rename(old, args.new).name} now.")
        elif args.avatars_command == "remove":
            _remove(library, store, args.name)
        else:
            _voice(library, args)
    except SeveralFacesError as exc:  # its message lists the faces, numbered as --face takes them
        return fail(f"{exc.message}\nChoose one with --face N.")
    except (PortraitError, RigError) as exc:
        return fail(exc.message)
    except (LibraryError, VoiceError) as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"{exc.filename or library.path} could not be written: {exc.strerror or exc}")
    return 0


def _list(library, setting: str | None) -> None:
    current = library.in_use(setting)
    for avatar in library.avatars:
        state = "in use" if avatar == current else ""
        if avatar.missing:
            state = "MISSING: " + avatar.missing_message
        print("\t".join((avatar.name, avatar.kind, str(avatar.manifest), avatar.voice_label,
                         state)).rstrip())
    if current is None and setting:
        print(f"(in use: {setting}, which is not in the library)")


def _import(library, args: argparse.Namespace) -> None:
    from pipeline.face.landmarks import FaceLandmarker

    models: list[FaceLandmarker] = []

    def landmarker() -> FaceLandmarker:
        if not models:  # loaded only where the picture was not imported before
            models.append(FaceLandmarker())
        return models[0]

    try:
        result = library.import_picture(args.picture, args.face, landmarker, name=args.name)
    finally:
        for model in models:
            model.close()
    avatar = result.avatar
    if result.reused:
        print(f"{args.picture.name} was imported before: it is the avatar {avatar.name} "
              f"({avatar.manifest.parent}).")
    else:
        print(f"Added {avatar.name} ({avatar.manifest.parent}).")
    print(f"Make it the avatar with: lipsync-studio avatars use {shlex.quote(avatar.name)}")


def _use(library, store, name: str) -> None:
    from app.avatar_library import LibraryError
    from render.rigs.loader import load_avatar_rig

    avatar = library.named(name)
    if avatar.missing:
        raise LibraryError(avatar.missing_message)
    load_avatar_rig(avatar.manifest)  # a broken rig is told now, not at the next start
    settings = saved_settings(store)
    store.save(replace(settings, avatar_manifest=avatar.setting))
    print(f"{avatar.name} is the avatar now.")


def _remove(library, store, name: str) -> None:
    avatar = library.named(name)
    settings = saved_settings(store)
    in_use = library.in_use(settings.avatar_manifest) == avatar
    removed = library.remove(avatar)
    print(removed.message)
    if in_use:
        store.save(replace(settings, avatar_manifest=None))
        print(f"{avatar.name} was the avatar: the bundled avatar is the avatar now.")


def _voice(library, args: argparse.Namespace) -> None:
    from app.avatar_library import LibraryError
    from app.voices import catalogue, choose_voice

    avatar = library.named(args.name)
    voice = None
    if args.voice is not None:
        chosen = choose_voice(args.voice)  # VoiceError names a voice not installed
        speakers = max(1, len(chosen.speakers))
        if not 0 <= args.speaker < speakers:
            raise LibraryError(f"{chosen.name} has {speakers} speaker{'s' if speakers > 1 else ''}: "
                               f"--speaker takes 0 to {speakers - 1}.")
        # Kept by name where the catalogue has it, so it follows the voices folder.
        installed = catalogue().named(chosen.name)
        voice = chosen.name if installed is not None and installed.path == chosen.path \
            else str(chosen.path.absolute())
    elif args.speaker:
        raise LibraryError("--speaker goes with a VOICE.")
    changed = library.set_voice(avatar, voice, args.speaker)
    print(f"{changed.name} speaks with {changed.voice_label} now.")
