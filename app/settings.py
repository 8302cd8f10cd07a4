"""The one settings model: validated, versioned, saved as JSON in the user's config folder.

A bad value never loses the others: each field is checked on its own, a bad one falls
back to its default, and every fallback is reported so the UI can show it.
"""

from __future__ import annotations

import ipaddress
import os
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from app.config_files import write_json
from pipeline.core.json_text import json_float, parse_json
from pipeline.core.modes import DEFAULT_MODE, MODE_NAMES
from pipeline.infer.providers import PROVIDERS
from render.gpu.mouth_path import MOUTH_FRAMES
from render.outputs.background import (
    BACKGROUND_MODES,
    COLOUR_FORMS,
    ColourError,
    parse_colour,
)
from render.outputs.frame_size import SizeError, parse_size

SETTINGS_VERSION = 1


@dataclass(frozen=True)
class Settings:
    version: int = SETTINGS_VERSION
    # None = the system's default output device.
    audio_output_device: str | None = None
    # The microphone drives the mouth whenever the voice is not speaking.
    mic_enabled: bool = True
    # None = the system's default input device.
    mic_device: str | None = None
    mic_gain_db: float = 0.0
    # Input below this level is silence (keyboard clicks, fans): the mouth stays shut.
    mic_gate_db: float = -50.0
    # "model": our trained lip-shape model; "volume": a volume gate (PNGtuber style).
    mic_lipsync: str = "model"
    # None = the bundled avatar.
    avatar_manifest: str | None = None
    # A new line while the avatar speaks: "interrupt" cuts it, "queue" says it after what
    # waits (chat and donation messages read in turn).
    speech_queue: str = "interrupt"
    # Streaming trade-off between time to first audio and quality (see pipeline.voice.streaming_tts).
    latency_mode: str = DEFAULT_MODE
    # Speaking rate as a multiple of the voice's natural rate (piper length_scale = 1/rate).
    speech_rate: float = 1.0
    volume: float = 1.0
    target_fps: int = 60
    # The frame rate at most when OpenGL renders on the CPU (no GPU driver: llvmpipe).
    # With the avatar drawn in a GL window of its own (no Qt composing), the idle app at
    # 60 fps takes 0.53 cores on 2-core llvmpipe, less than 30 fps took before it (0.73;
    # bench/results/app_cpu_vm_2core_epyc.json), and only at 60 fps does the A/V offset
    # median stay within 5 ms (4.2 ms against 8.4 at 30: bench/results/av_sync*.json).
    # A user can still cap it here for a busy machine.
    software_gl_fps: int = 60
    blinking: bool = True
    breathing: bool = True
    background: str = "#20232a"
    # Where the voice's inference runs: "auto" takes the fastest the machine has
    # (TensorRT → CUDA → CPU, pipeline/infer/sessions.py); "cpu" forces the CPU. At start.
    inference_provider: str = "auto"
    # Who makes the avatar's mouth frames on an NVIDIA GPU: "auto" times OpenGL's shaders
    # and CUDA's kernels (handed to GL through CUDA-GL interop) on the avatar at start and
    # takes the one with the lower P99 (render/gpu/mouth_path.py); "opengl" or "cuda"
    # force one. Without CUDA-GL interop, OpenGL, and the status says why.
    mouth_frames: str = "auto"
    # -- outputs for OBS (issue 13) --
    # The avatar-only window ("Lipsync Studio — Avatar"), opened at start when on.
    output_window: bool = False
    # "720p", "1080p" or WIDTHxHEIGHT.
    output_size: str = "720p"
    output_borderless: bool = False
    output_on_top: bool = False
    # transparent (premultiplied alpha), solid (output_colour) or chroma (chroma_colour).
    output_background: str = "transparent"
    output_colour: str = "#20232a"
    chroma_colour: str = "#00ff00"
    # The browser-source page on 127.0.0.1.
    browser_source: bool = False
    browser_source_port: int = 8765
    # The virtual camera (pyvirtualcam, the [vcam] extra).
    virtual_camera: bool = False
    virtual_camera_size: str = "720p"
    virtual_camera_fps: int = 30
    # Captions: the voice's words shown this long before they are heard.
    captions_lead_ms: float = 150.0
    captions_in_window: bool = True
    # Also written into an OBS text source named obs_captions_source.
    captions_to_obs: bool = False
    # obs-websocket v5; the password lives in the system keyring (app/obs/credentials.py).
    obs_host: str = "127.0.0.1"
    obs_port: int = 4455
    # None = OBS's current program scene.
    obs_scene: str | None = None
    obs_captions_source: str = "Lipsync Studio captions"
    # Keep OBS's mic sync offset at the measured delay while the app runs (turned on by a
    # successful "Add to OBS"; app/obs/live.py).
    obs_live_updates: bool = False
    # OBS's video frame rate. Its window capture samples the avatar window on that grid,
    # so a frame reaches the recording half an OBS frame after the window shows it on
    # average (18-45 ms median measured, bench/results/obs_av_offset.json): the avatar
    # window shows each mouth that much early.
    obs_fps: int = 30
    # -- the local API (issue 22; app/api/, docs/api.md) --
    # Off by default: HTTP and WebSocket on one port.
    api_enabled: bool = False
    api_port: int = 8766
    # Where it listens. Anything but a loopback address also needs api_allow_network: a
    # second, explicit choice, since every computer on the network can then knock.
    api_bind_address: str = "127.0.0.1"
    api_allow_network: bool = False
    # Pages of other sites may not drive the API from a browser unless listed here
    # (their origins, e.g. "https://example.com", separated by spaces or commas).
    api_allowed_origins: str = ""
    # Limits, each refusal naming its limit. A message: a /stream text piece or a
    # control command; 64 KiB holds ~10 minutes of speech as text.
    api_max_message_bytes: int = 65536
    # Per connection, over any one second.
    api_messages_per_second: int = 50
    # /stream and /v1/audio/speech at once: the 50 streams the API is built and
    # measured for, and some room (bench/api.py).
    api_max_streams: int = 64
    # -- our lip sync on other apps' avatars (render/outputs/vmc.py, vtube_studio.py) --
    # VTube Studio's plugin API (its default port 8001).
    vtube_studio: bool = False
    vtube_studio_host: str = "127.0.0.1"
    vtube_studio_port: int = 8001
    # What we cannot measure: how long VTube Studio takes to show a parameter it got.
    # Sent this much earlier so its frame and our sound meet.
    vtube_studio_offset_ms: float = 0.0
    # VMC protocol (OSC over UDP). 39539 is where apps that draw the avatar listen
    # (VSeeFace's VMC receiver, Warudo, VNyan: the port the user set there); 39540 is
    # VirtualMotionCapture's and VSeeFace's own for senders of blend shapes alone.
    vmc: bool = False
    vmc_host: str = "127.0.0.1"
    vmc_port: int = 39539
    # "vrm0": blend shapes A I U E O (VRM 0.x, VSeeFace); "vrm1": aa ih ou ee oh (VRM 1.0).
    vmc_blendshapes: str = "vrm0"
    vmc_offset_ms: float = 0.0
    # -- daily use (issue 23) --
    # The voice when the avatar has none of its own: None = the bundled voice, else a
    # voice's name in the catalogue (app/voices.py) or the path of its .onnx.
    voice: str | None = None
    # Which speaker of a multi-speaker piper voice (its config's speaker_id_map).
    voice_speaker: int = 0
    # Speaking rate per voice name, over speech_rate: a fast voice can be slowed alone.
    voice_rates: dict[str, float] = field(default_factory=dict)
    # Action → key combination in pynput's form ("<ctrl>+<alt>+s"); "" = no key. Global
    # where the desktop allows (app/hotkeys.py). "expression:NAME" picks the avatar's
    # expression of that name.
    hotkeys: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_HOTKEYS))
    # An expression change cross-fades over this long.
    expression_fade_ms: float = 150.0
    # The avatar's motion, each a strength from 0 (off) to 1 (the most a rig allows):
    # a bounce and squash while speaking, a tilt with the voice's emphasis, a shake on
    # loud sound, a gentle idle sway, and (photo avatars) head turn and nod.
    motion_bounce: float = 0.5
    motion_tilt: float = 0.3
    motion_shake: float = 0.0
    motion_sway: float = 0.3
    motion_head_turn: float = 0.5
    # The main window's place and size (Qt's saveGeometry, base64), and whether its
    # controls are hidden so the avatar fills it.
    window_geometry: str | None = None
    window_controls_hidden: bool = False


# The actions a hotkey can do besides "expression:NAME". Defaults use Ctrl+Alt, which
# games rarely bind; push to talk has none, since holding it keeps the mic shut otherwise.
HOTKEY_ACTIONS = ("stop", "mic_mute", "push_to_talk", "speak_clipboard", "next_avatar",
                  "previous_avatar", "toggle_avatar")
DEFAULT_HOTKEYS = {
    "stop": "<ctrl>+<alt>+s",
    "mic_mute": "<ctrl>+<alt>+m",
    "push_to_talk": "",
    "speak_clipboard": "<ctrl>+<alt>+v",
    "next_avatar": "<ctrl>+<alt>+n",
    "previous_avatar": "<ctrl>+<alt>+p",
    "toggle_avatar": "<ctrl>+<alt>+h",
    "expression:neutral": "<ctrl>+<alt>+0",
    "expression:happy": "<ctrl>+<alt>+1",
    "expression:surprised": "<ctrl>+<alt>+2",
    "expression:angry": "<ctrl>+<alt>+3",
    "expression:sad": "<ctrl>+<alt>+4",
}


@dataclass(frozen=True)
class FieldRule:
    kind: type
    low: float | None = None
    high: float | None = None
    optional: bool = False
    choices: tuple[str, ...] = ()
    # For dict fields: the values' type (keys are strings).
    item_kind: type | None = None


RULES: dict[str, FieldRule] = {
    "audio_output_device": FieldRule(str, optional=True),
    "latency_mode": FieldRule(str, choices=MODE_NAMES),
    "speech_queue": FieldRule(str, choices=("interrupt", "queue")),
    "avatar_manifest": FieldRule(str, optional=True),
    "mic_enabled": FieldRule(bool),
    "mic_device": FieldRule(str, optional=True),
    "mic_gain_db": FieldRule(float, -20.0, 30.0),
    "mic_gate_db": FieldRule(float, -90.0, 0.0),
    "mic_lipsync": FieldRule(str, choices=("model", "volume")),
    "speech_rate": FieldRule(float, 0.5, 2.0),
    "volume": FieldRule(float, 0.0, 1.0),
    "target_fps": FieldRule(int, 24, 144),
    "software_gl_fps": FieldRule(int, 24, 144),
    "blinking": FieldRule(bool),
    "breathing": FieldRule(bool),
    "background": FieldRule(str),
    "inference_provider": FieldRule(str, choices=PROVIDERS),
    "mouth_frames": FieldRule(str, choices=MOUTH_FRAMES),
    "output_window": FieldRule(bool),
    "output_size": FieldRule(str),
    "output_borderless": FieldRule(bool),
    "output_on_top": FieldRule(bool),
    "output_background": FieldRule(str, choices=BACKGROUND_MODES),
    "output_colour": FieldRule(str),
    "chroma_colour": FieldRule(str),
    "browser_source": FieldRule(bool),
    "browser_source_port": FieldRule(int, 1024, 65535),
    "virtual_camera": FieldRule(bool),
    "virtual_camera_size": FieldRule(str, choices=("720p", "1080p")),
    "virtual_camera_fps": FieldRule(int, 30, 60),
    "captions_lead_ms": FieldRule(float, 0.0, 2000.0),
    "captions_in_window": FieldRule(bool),
    "captions_to_obs": FieldRule(bool),
    "obs_host": FieldRule(str),
    "obs_port": FieldRule(int, 1, 65535),
    "obs_scene": FieldRule(str, optional=True),
    "obs_captions_source": FieldRule(str),
    "obs_live_updates": FieldRule(bool),
    "obs_fps": FieldRule(int, 10, 240),
    "api_enabled": FieldRule(bool),
    "api_port": FieldRule(int, 1024, 65535),
    "api_bind_address": FieldRule(str),
    "api_allow_network": FieldRule(bool),
    "api_allowed_origins": FieldRule(str, optional=True),
    "api_max_message_bytes": FieldRule(int, 1024, 16 * 2**20),
    "api_messages_per_second": FieldRule(int, 1, 10_000),
    "api_max_streams": FieldRule(int, 1, 1024),
    "vtube_studio": FieldRule(bool),
    "vtube_studio_host": FieldRule(str),
    "vtube_studio_port": FieldRule(int, 1, 65535),
    "vtube_studio_offset_ms": FieldRule(float, -500.0, 1000.0),
    "vmc": FieldRule(bool),
    "vmc_host": FieldRule(str),
    "vmc_port": FieldRule(int, 1, 65535),
    "vmc_blendshapes": FieldRule(str, choices=("vrm0", "vrm1")),
    "vmc_offset_ms": FieldRule(float, -500.0, 1000.0),
    "voice": FieldRule(str, optional=True),
    "voice_speaker": FieldRule(int, 0, 10_000),
    "voice_rates": FieldRule(dict, 0.5, 2.0, item_kind=float),
    "hotkeys": FieldRule(dict, item_kind=str),
    "expression_fade_ms": FieldRule(float, 0.0, 2000.0),
    "motion_bounce": FieldRule(float, 0.0, 1.0),
    "motion_tilt": FieldRule(float, 0.0, 1.0),
    "motion_shake": FieldRule(float, 0.0, 1.0),
    "motion_sway": FieldRule(float, 0.0, 1.0),
    "motion_head_turn": FieldRule(float, 0.0, 1.0),
    "window_geometry": FieldRule(str, optional=True),
    "window_controls_hidden": FieldRule(bool),
}

COLOUR_FIELDS = ("background", "output_colour", "chroma_colour")
# Each side of the output window's size, in pixels (up to 8K).
OUTPUT_SIDES = (16, 7680)


def check(name: str, value: Any) -> str | None:
    """Why `value` is not acceptable for field `name`, or None when it is."""
    rule = RULES[name]
    if value is None:
        return None if rule.optional else "must be set"
    if rule.kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = json_float(value)
        if value is None:
            return "is far too large a number"
    if rule.kind is bool and not isinstance(value, bool):
        return "must be true or false"
    if rule.kind is dict:
        return None if isinstance(value, dict) else "must be a mapping of names to values"
    if not isinstance(value, rule.kind) or (rule.kind is not bool and isinstance(value, bool)):
        return f"must be a {rule.kind.__name__}"
    if rule.low is not None and not (rule.low <= value <= rule.high):
        return f"must be between {rule.low:g} and {rule.high:g}"
    if rule.choices and value not in rule.choices:
        return "must be one of " + ", ".join(rule.choices)
    if name in COLOUR_FIELDS:
        try:
            parse_colour(value)
        except ColourError:
            return f"must be a colour: {COLOUR_FORMS}"
    if name == "output_size":
        lo, hi = OUTPUT_SIDES
        try:
            fits = all(lo <= side <= hi for side in parse_size(value))
        except SizeError:
            fits = False
        if not fits:
            return "must be 720p, 1080p or WIDTHxHEIGHT"
    if name == "api_bind_address":
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return "must be an IP address of this computer, e.g. 127.0.0.1 or 0.0.0.0"
    if rule.kind is str and not rule.optional and not value:
        return "must not be empty"
    return None


def _mapping_item_problem(name: str, key: Any, item: Any, rule: FieldRule) -> str | None:
    """Why one entry of a dict field is not acceptable, or None when it is."""
    if not isinstance(key, str) or not key:
        return "is not a name"
    ok_number = (rule.item_kind is float and isinstance(item, (int, float))
                 and not isinstance(item, bool))
    if not ok_number and not isinstance(item, rule.item_kind):
        return f"must be a {rule.item_kind.__name__}"
    if rule.low is not None and not (rule.low <= item <= rule.high):
        return f"must be between {rule.low:g} and {rule.high:g}"
    if name == "hotkeys" and key not in HOTKEY_ACTIONS and not (
            key.startswith("expression:") and len(key) > len("expression:")):
        return "is not an action (the actions: " + ", ".join(HOTKEY_ACTIONS) + ", expression:NAME)"
    return None


def _value(name: str, value: Any) -> Any:
    rule = RULES[name]
    if rule.kind is float and value is not None:
        return float(value)
    if rule.kind is dict and rule.item_kind is float:
        return {k: float(v) for k, v in value.items()}
    return value


def validate(data: dict[str, Any]) -> tuple[Settings, list[str]]:
    """Settings from a raw mapping, plus one message for every value that was not used."""
    problems: list[str] = []
    defaults = Settings()
    values: dict[str, Any] = {}
    version = data.get("version", SETTINGS_VERSION)
    if version != SETTINGS_VERSION:
        problems.append(f"settings version {version!r} is not {SETTINGS_VERSION}: read what still fits")
    known = {f.name for f in fields(Settings)}
    for key in data:
        if key not in known:
            problems.append(f"unknown setting {key!r} ignored")
    for name in RULES:
        if name not in data:
            continue
        why = check(name, data[name])
        if why is None and RULES[name].kind is dict:
            # Entry by entry: one bad hotkey or rate loses only itself.
            kept = {}
            for key, item in data[name].items():
                bad = _mapping_item_problem(name, key, item, RULES[name])
                if bad is None:
                    kept[key] = item
                else:
                    problems.append(f"{name}: {key!r} = {item!r} {bad}; left out")
            values[name] = _value(name, kept)
        elif why is None:
            values[name] = _value(name, data[name])
        else:
            problems.append(f"{name} = {data[name]!r} {why}; using {getattr(defaults, name)!r}")
    return Settings(**values), problems


def config_dir() -> Path:
    override = os.environ.get("LIPSYNC_STUDIO_CONFIG_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "lipsync-studio"


@dataclass
class SettingsStore:
    """Loads and saves Settings; keeps the problems found so the UI can show them."""

    path: Path = field(default_factory=lambda: config_dir() / "settings.json")
    problems: list[str] = field(default_factory=list)

    def load(self) -> Settings:
        self.problems = []
        if not self.path.exists():
            return Settings()
        try:
            data = parse_json(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # ValueError: not UTF-8, or not JSON
            backup = self._keep_bad_file()
            self.problems.append(f"settings file unreadable ({exc}); kept it as {backup.name}, using defaults")
            return Settings()
        if not isinstance(data, dict):
            backup = self._keep_bad_file()
            self.problems.append(f"settings file is not a JSON object; kept it as {backup.name}, using defaults")
            return Settings()
        settings, self.problems = validate(data)
        return settings

    def save(self, settings: Settings) -> None:
        """Raises OSError (the old file kept whole) where it cannot be written."""
        write_json(self.path, asdict(settings))

    def _keep_bad_file(self) -> Path:
        backup = self.path.with_name(f"{self.path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}")
        os.replace(self.path, backup)
        return backup
