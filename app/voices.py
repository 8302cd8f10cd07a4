"""The voice catalogue: the bundled voice and every piper voice in the voices folder of
the config directory (`NAME.onnx` with `NAME.onnx.json` beside it), each with what a
user picks it by: name, language (its config's espeak voice, which it reads text with),
quality, sample rate and speakers.

A broken voice in the folder is left out of the list and its problem kept, naming the
file: the other voices stay listed. Choosing a voice (by name or by path) and adding one
(copied into the folder) check both files first, so a broken voice never replaces the
one in use. No Qt: the window, the command line and the API share it.
"""

from __future__ import annotations

import filecmp
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from app.settings import Settings, config_dir
from pipeline.voice.voice_files import (
    BUNDLED_VOICE,
    CONFIG_SUFFIX,
    VoiceError,
    VoiceFiles,
    check_voice,
    config_quality,
)

MODEL_SUFFIX = ".onnx"


def voices_folder() -> Path:
    return config_dir() / "voices"


@dataclass(frozen=True, slots=True)
class Voice:
    """One usable voice. `speakers` names a multi-speaker voice's speakers by id (its
    config's speaker_id_map; an id the map leaves out is named by its number); a voice
    of one speaker has none."""

    name: str
    language: str
    quality: str | None
    sample_rate: int
    speakers: tuple[str, ...]
    files: VoiceFiles
    bundled: bool = False

    @property
    def path(self) -> Path:
        return self.files.model

    def speaker_label(self, number: int) -> str:
        """How speaker `number` is shown: "2: bob", or "1" for one the config leaves
        unnamed."""
        name = self.speakers[number]
        return name if name == str(number) else f"{number}: {name}"

    def as_json(self) -> dict:
        return {"name": self.name, "language": self.language, "quality": self.quality,
                "sample_rate": self.sample_rate, "speakers": list(self.speakers),
                "path": str(self.path), "bundled": self.bundled}


def read_voice(files: VoiceFiles, bundled: bool = False) -> Voice:
    """The voice of `files`, both checked; VoiceError (naming the file) if either is
    missing or cannot be used."""
    config = check_voice(files)
    speakers: tuple[str, ...] = ()
    if config.num_speakers > 1:
        by_id = {number: name for name, number in config.speaker_id_map.items()}
        speakers = tuple(by_id.get(number, str(number)) for number in range(config.num_speakers))
    return Voice(files.name, config.espeak_voice, config_quality(files.config),
                 config.sample_rate, speakers, files, bundled)


@dataclass(slots=True)
class Catalogue:
    """The voices found (the bundled one first, then the folder's by name) and, by the
    voice's name, a message for each voice in the folder that could not be used."""

    voices: list[Voice] = field(default_factory=list)
    problems: dict[str, str] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [voice.name for voice in self.voices]

    def named(self, name: str) -> Voice | None:
        return next((voice for voice in self.voices if voice.name == name), None)


def catalogue(folder: Path | None = None) -> Catalogue:
    """Every voice: the bundled one and those in `folder` (the voices folder unless told)."""
    folder = voices_folder() if folder is None else folder
    found = Catalogue([read_voice(BUNDLED_VOICE, bundled=True)])
    if not folder.is_dir():
        return found
    # A voice is seen by either of its files, so a pair missing one half is reported.
    pairs = sorted({VoiceFiles.at(path) for path in folder.iterdir()
                    if path.name.endswith((MODEL_SUFFIX, MODEL_SUFFIX + CONFIG_SUFFIX))},
                   key=lambda files: files.name)
    for files in pairs:
        if files.name == BUNDLED_VOICE.name:
            found.problems[files.name] = (f"{files.model}: has the bundled voice's name, "
                                          f"{BUNDLED_VOICE.name}; rename it to use it.")
            continue
        try:
            found.voices.append(read_voice(files))
        except VoiceError as exc:
            found.problems[files.name] = str(exc)
    return found


def choose_voice(choice: str | None, folder: Path | None = None) -> Voice:
    """The voice `choice` names (Settings.voice, `--voice`): None or the bundled voice's
    name for the bundled voice, a catalogue name, or the path of a voice's .onnx (or its
    .onnx.json). VoiceError, in words, for a name not installed (listing those that are)
    or a voice that cannot be used."""
    if choice is None or choice == BUNDLED_VOICE.name:
        return read_voice(BUNDLED_VOICE, bundled=True)
    if _is_path(choice):
        files = VoiceFiles.at(Path(choice).expanduser())
        if not files.model.exists() and not files.config.exists():
            raise VoiceError(f"Voice not found: {choice} (no {files.model.name} there).")
        return read_voice(files)
    found = catalogue(folder)
    voice = found.named(choice)
    if voice is not None:
        return voice
    if choice in found.problems:
        raise VoiceError(found.problems[choice])
    raise VoiceError(f"No voice named {choice!r}. Installed: {', '.join(found.names)} "
                     "('lipsync-studio voices' lists them; a piper .onnx path works too).")


def _is_path(choice: str) -> bool:
    return (os.sep in choice or "/" in choice
            or choice.endswith((MODEL_SUFFIX, MODEL_SUFFIX + CONFIG_SUFFIX)))


def add_voice(path: str | Path, folder: Path | None = None) -> Voice:
    """Copy the piper voice at `path` (its .onnx or .onnx.json; the other file must be
    beside it) into the voices folder, checked first; returns it as installed there. A
    voice of that name already there is kept: the same files are not copied again, other
    files of that name are refused."""
    folder = voices_folder() if folder is None else folder
    source = Path(path).expanduser()
    if not source.name.endswith((MODEL_SUFFIX, MODEL_SUFFIX + CONFIG_SUFFIX)):
        raise VoiceError(f"{source}: is not a piper voice (a piper voice is a {MODEL_SUFFIX} "
                         f"file with its {MODEL_SUFFIX}{CONFIG_SUFFIX} config beside it).")
    files = VoiceFiles.at(source)
    if not files.model.exists() and not files.config.exists():
        raise VoiceError(f"Voice not found: {source}.")
    read_voice(files)
    if files.name == BUNDLED_VOICE.name:
        raise VoiceError(f"{files.model}: is named as the bundled voice, {files.name}, which "
                         "is installed already.")
    target = VoiceFiles(folder / files.model.name)
    if target.model.exists() or target.config.exists():
        if _same(files, target):
            return read_voice(target)
        raise VoiceError(f"A voice named {files.name} is installed already ({target.model}): "
                         "remove it first, or rename the one to add.")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        # The config last: until it is there the folder holds no half-copied voice that
        # the catalogue would list.
        _copy(files.model, target.model)
        _copy(files.config, target.config)
    except OSError as exc:
        target.model.unlink(missing_ok=True)
        raise VoiceError(f"Cannot copy the voice into {folder}: {exc.strerror}.") from None
    return read_voice(target)


def _same(a: VoiceFiles, b: VoiceFiles) -> bool:
    return all(x.exists() and y.exists() and filecmp.cmp(x, y, shallow=False)
               for x, y in ((a.model, b.model), (a.config, b.config)))


def _copy(source: Path, target: Path) -> None:
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        shutil.copyfile(source, partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def speech_rate(settings: Settings, voice: str) -> float:
    """The speaking rate for the voice named `voice`: its own rate where one is set
    (Settings.voice_rates), else the general one."""
    return settings.voice_rates.get(voice, settings.speech_rate)
