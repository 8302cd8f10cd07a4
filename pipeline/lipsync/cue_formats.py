"""Mouth cues in the files animators load: Rhubarb Lip Sync's JSON, TSV and XML, Moho /
Papagayo switch data (.dat), Live2D motions (.motion3.json), VRM animations (.vrma), and
the WebVTT / SRT captions (written by pipeline.voice.captions, chosen here).

A format is chosen by its name (`--format`) or by the file's suffix; a name and a suffix
that belong to different formats are refused, and so is a suffix that names none.

What each file shows is what our own rigs draw: the frame-rate formats (.dat,
.motion3.json, .vrma) take each frame's pose from VisemeTrack.frame_pose, as the video
export does, so a closure shorter than a frame still reaches a frame; Live2D's and VRM's
values come from pipeline.core.mouth_shapes, as the VMC and VTube Studio outputs send them.
Pure: no Qt, no files written (each writer returns the file's bytes).
"""

from __future__ import annotations

import json
import math
import re
import struct
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.core.frames import PhonemeTiming, VisemeCue, frame_count
from pipeline.core.mouth_shapes import VRM1_VOWELS, MouthShape, mouth_shape
from pipeline.core.visemes import OVR_VISEMES, RHUBARB_SHAPE
from pipeline.voice.viseme_track import VisemeTrack

# Rhubarb's own default for Moho's switch data (its --datFrameRate), the film rate.
DEFAULT_FPS = 24.0
# Above any display's refresh rate (the fastest monitors show 500 Hz), and below the
# rate at which two frames' times would round to one key time of motion3.json's 4
# decimals (10,000): --fps 1e9 asked for billions of frames, and the writer never ended.
MAX_FPS = 1000.0
# Rhubarb writes its times in centiseconds (its internal resolution), our JSON in ms.
_RHUBARB_TICKS = 100
_JSON_TICKS = 1000


class CueFormatError(ValueError):
    """A format or file name that cannot be written as asked, said in one line."""


@dataclass(frozen=True, slots=True)
class CueFormat:
    """One file format: its `name` for --format, the `suffixes` that choose it (the first
    is the one to use), `captions` when it holds words rather than mouth shapes, and
    `frame_rate` when its contents are sampled at --fps."""

    name: str
    suffixes: tuple[str, ...]
    title: str
    captions: bool = False
    frame_rate: bool = False


FORMATS: dict[str, CueFormat] = {f.name: f for f in (
    CueFormat("ovr", (".json",), "Rhubarb-shaped JSON with the 15 OVR visemes"),
    CueFormat("rhubarb", (".json",), "Rhubarb's JSON of shapes A-H and X"),
    CueFormat("tsv", (".tsv",), "Rhubarb's TSV of shapes A-H and X"),
    CueFormat("xml", (".xml",), "Rhubarb's XML of shapes A-H and X"),
    CueFormat("dat", (".dat",), "Moho / Papagayo switch data", frame_rate=True),
    CueFormat("motion3", (".motion3.json",), "a Live2D motion of ParamMouthOpenY and ParamMouthForm",
              frame_rate=True),
    CueFormat("vrma", (".vrma",), "a VRM animation of the expressions aa ih ou ee oh", frame_rate=True),
    CueFormat("vtt", (".vtt",), "WebVTT captions", captions=True),
    CueFormat("srt", (".srt",), "SRT captions", captions=True),
)}
# A suffix chooses the first format that has it: .json is the OVR JSON it always was.
_BY_SUFFIX: dict[str, CueFormat] = {}
for _format in FORMATS.values():
    for _suffix in _format.suffixes:
        _BY_SUFFIX.setdefault(_suffix, _format)
SUFFIXES = ", ".join(_BY_SUFFIX)
MOUTH_SUFFIXES = ", ".join(s for s, f in _BY_SUFFIX.items() if not f.captions)


def _suffix(path: Path) -> str:
    name = path.name.lower()
    # Longest first, so NAME.motion3.json is a motion and not Rhubarb's JSON.
    for suffix in sorted(_BY_SUFFIX, key=len, reverse=True):
        if name.endswith(suffix) and len(name) > len(suffix):
            return suffix
    return path.suffix.lower()


def cue_format(path: Path, name: str | None = None) -> CueFormat:
    """The format to write `path` in: `name`'s (a FORMATS key), else its suffix's.
    CueFormatError for an unknown name, a suffix that names no format when `name` is
    None, or a suffix that belongs to another format than `name`."""
    suffix = _suffix(path)
    if name is None:
        if suffix not in _BY_SUFFIX:
            raise CueFormatError(
                f"{path}: cannot tell the cue format from {suffix or 'a name without a suffix'}; "
                f"end it in {SUFFIXES}, or give --format")
        return _BY_SUFFIX[suffix]
    if name not in FORMATS:
        raise CueFormatError(f"unknown cue format {name!r}: use one of {', '.join(FORMATS)}")
    chosen = FORMATS[name]
    owner = _BY_SUFFIX.get(suffix)
    if owner is not None and suffix not in chosen.suffixes:
        raise CueFormatError(f"{path}: {suffix} is for {owner.title}, not --format {name}: "
                             f"name it NAME{chosen.suffixes[0]}, or leave --format out")
    return chosen


def check_fps(fps: float) -> None:
    """CueFormatError unless `fps` is a frame rate a file can be sampled at."""
    if not (math.isfinite(fps) and 0 < fps <= MAX_FPS):
        raise CueFormatError(f"--fps {fps:g} is not a frame rate: use a number above 0 and "
                             f"at most {MAX_FPS:g}, e.g. {DEFAULT_FPS:g}")


def contiguous(cues: Sequence[VisemeCue], duration: float, ticks: int) -> list[tuple[int, int, str]]:
    """(start, end, viseme) in whole 1/`ticks` s, covering 0 to `duration` without gaps
    or overlaps: a gap and the tail are "sil", cues past `duration` are cut there, and a
    cue that rounds to nothing vanishes (its neighbour takes its place)."""
    if duration < 0:
        raise ValueError("duration must not be negative")
    end = round(duration * ticks)
    # Each boundary is rounded once and reused as the next cue's start, so rounding can
    # neither open gaps nor overlap cues.
    spans: list[tuple[int, int, str]] = []
    position = 0
    for cue in sorted(cues, key=lambda c: c.start):
        start = min(max(round(cue.start * ticks), position), end)
        stop = min(round(cue.end * ticks), end)
        if start > position:
            spans.append((position, start, "sil"))
            # The gap ends here even when the cue rounds to nothing after it.
            position = start
        if stop > start:
            spans.append((start, stop, cue.value))
            position = stop
    if position < end:
        spans.append((position, end, "sil"))
    return spans


def _merged(spans, rename) -> list[tuple[int, int, str]]:
    """Spans with their values renamed, equal neighbours joined."""
    out: list[tuple[int, int, str]] = []
    for start, stop, value in spans:
        value = rename.get(value, value)
        if out and out[-1][2] == value:
            out[-1] = (out[-1][0], stop, value)
        else:
            out.append((start, stop, value))
    return out


# What XML 1.0 text cannot hold (controls, lone surrogates: a file name's bytes that are
# not UTF-8 arrive as those), nor UTF-8 encode; and a carriage return, which an XML
# reader turns into a line feed.
_NOT_TEXT = re.compile("[^\t\n\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def shown_file_name(name: str) -> str:
    """A sound file's name as every format can hold it: what is not text (a control
    character, a byte of the name that is not UTF-8) as U+FFFD."""
    return _NOT_TEXT.sub("\ufffd", name)


def cues_document(cues: Sequence[VisemeCue], sound_file: str, duration: float,
                  fmt: str = "ovr") -> dict:
    """Rhubarb's JSON shape: times in whole milliseconds, cues contiguous from 0 to
    `duration` (gaps and the tail are "sil", or X), equal neighbours merged; values
    the OVR visemes (`fmt` "ovr") or Rhubarb's shapes ("rhubarb")."""
    sets = {"ovr": "ovr15", "rhubarb": "rhubarb"}
    if fmt not in sets:
        raise ValueError(f"unknown cue format {fmt!r}: use one of {', '.join(sets)}")
    spans = _merged(contiguous(cues, duration, _JSON_TICKS),
                    RHUBARB_SHAPE if fmt == "rhubarb" else {})
    return {
        "metadata": {"soundFile": shown_file_name(sound_file), "duration": round(duration * _JSON_TICKS) / _JSON_TICKS,
                     "visemeSet": sets[fmt]},
        "mouthCues": [{"start": a / _JSON_TICKS, "end": b / _JSON_TICKS, "value": v}
                      for a, b, v in spans],
    }


def _rhubarb_spans(cues, duration) -> list[tuple[int, int, str]]:
    return _merged(contiguous(cues, duration, _RHUBARB_TICKS), RHUBARB_SHAPE)


def _centis(ticks: int) -> str:
    return f"{ticks // _RHUBARB_TICKS}.{ticks % _RHUBARB_TICKS:02d}"


def rhubarb_tsv(cues: Sequence[VisemeCue], duration: float) -> str:
    """Rhubarb's TSV: a "start<TAB>shape" line per cue, then the end time with X (the
    mouth closed after the sound), times in seconds to the centisecond."""
    spans = _rhubarb_spans(cues, duration)
    lines = [f"{_centis(a)}\t{v}" for a, _, v in spans]
    lines.append(f"{_centis(round(duration * _RHUBARB_TICKS))}\tX")
    return "\n".join(lines) + "\n"


def rhubarb_xml(cues: Sequence[VisemeCue], sound_file: str, duration: float) -> str:
    """Rhubarb's XML: <rhubarbResult> with <metadata> (soundFile, duration) and
    <mouthCues> of <mouthCue start= end=>shape</mouthCue>, contiguous from 0."""
    root = ET.Element("rhubarbResult")
    metadata = ET.SubElement(root, "metadata")
    ET.SubElement(metadata, "soundFile").text = shown_file_name(sound_file)
    ET.SubElement(metadata, "duration").text = _centis(round(duration * _RHUBARB_TICKS))
    mouth_cues = ET.SubElement(root, "mouthCues")
    for a, b, v in _rhubarb_spans(cues, duration):
        ET.SubElement(mouth_cues, "mouthCue", start=_centis(a), end=_centis(b)).text = v
    ET.indent(root)
    # The declaration as Rhubarb writes it (ElementTree's own has single quotes).
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _track(cues: Sequence[VisemeCue], duration: float) -> VisemeTrack:
    """The track our rigs would draw for `cues` over [0, duration] (silence where none)."""
    spans = contiguous(cues, duration, _JSON_TICKS) or [(0, 0, "sil")]
    return VisemeTrack([PhonemeTiming(v, v, a / _JSON_TICKS, b / _JSON_TICKS)
                        for a, b, v in spans])


def frame_poses(cues: Sequence[VisemeCue], duration: float, fps: float):
    """(frame start time, MouthPose) for every frame of a `duration`-second video at
    `fps`, as render/outputs/video_export.py counts and draws them."""
    check_fps(fps)
    track = _track(cues, duration)
    frames = frame_count(duration, fps)
    period = 1.0 / fps
    return [(i / fps, track.frame_pose(i / fps, period, duration)) for i in range(frames)]


def moho_dat(cues: Sequence[VisemeCue], duration: float, fps: float = DEFAULT_FPS) -> str:
    """Moho's switch data: "MohoSwitch1", then "frame shape" (frames from 1) where the
    shape changes, Rhubarb's letters, each frame the shape the video shows there; X on
    the frame after the last when the mouth is not closed already."""
    lines = ["MohoSwitch1"]
    shape = None
    poses = frame_poses(cues, duration, fps)
    for frame, (_, pose) in enumerate(poses, start=1):
        value = RHUBARB_SHAPE[OVR_VISEMES[pose.dominant]]
        if value != shape:
            lines.append(f"{frame} {value}")
            shape = value
    if shape != "X":
        lines.append(f"{len(poses) + 1} X")
    return "\n".join(lines) + "\n"


def _keys(times: list[float], values: np.ndarray) -> tuple[list[float], np.ndarray]:
    """The keys of a linear curve (rows of `values`, one column per channel) less those
    equal to both neighbours: dropping them leaves the same curve."""
    keep = [0] + [i for i in range(1, len(times) - 1)
                  if not (np.array_equal(values[i], values[i - 1])
                          and np.array_equal(values[i], values[i + 1]))]
    if len(times) > 1:
        keep.append(len(times) - 1)
    return [times[i] for i in keep], values[keep]


# motion3.json keys times to 4 decimals.
_KEY_DECIMALS = 4
_KEY_RESOLUTION_S = 10.0 ** -_KEY_DECIMALS


def _shapes(cues, duration, fps) -> tuple[list[float], list[MouthShape]]:
    """Each frame's mouth at its start, and the last held to `duration`: a player takes
    an animation's length from its last key, and it should last as long as the sound."""
    poses = frame_poses(cues, duration, fps)
    times, shapes = [t for t, _ in poses], [mouth_shape(p) for _, p in poses]
    # Not within motion3.json's resolution of the last frame's key (a sound that ends
    # 20 us into its frame): the two would be one key time, which a curve cannot hold.
    if duration - times[-1] >= _KEY_RESOLUTION_S:
        times.append(duration)
        shapes.append(shapes[-1])
    return times, shapes


LINEAR_SEGMENT = 0  # motion3.json's segment identifier for a linear segment


def live2d_motion(cues: Sequence[VisemeCue], duration: float, fps: float = DEFAULT_FPS) -> dict:
    """A Live2D Cubism motion3.json (Version 3): ParamMouthOpenY (0 shut .. 1 open) and
    ParamMouthForm (-1 round .. 1 wide) as linear curves keyed on the frames where they
    move. Meta's counts are exact: a segment per key after the first, a point per key."""
    times, shapes = _shapes(cues, duration, fps)
    curves = []
    for param, values in (("ParamMouthOpenY", [s.open for s in shapes]),
                          ("ParamMouthForm", [s.form for s in shapes])):
        keyed, column = _keys(times, np.array(values, dtype=np.float64)[:, None])
        flat = [round(keyed[0], _KEY_DECIMALS), round(float(column[0, 0]), _KEY_DECIMALS)]
        for t, v in zip(keyed[1:], column[1:, 0]):
            flat += [LINEAR_SEGMENT, round(t, _KEY_DECIMALS), round(float(v), _KEY_DECIMALS)]
        curves.append({"Target": "Parameter", "Id": param, "Segments": flat})
    # Linear segments: each adds one point to the curve's first.
    segments = sum((len(c["Segments"]) - 2) // 3 for c in curves)
    return {
        "Version": 3,
        "Meta": {"Duration": round(duration, _KEY_DECIMALS), "Fps": float(fps), "Loop": False,
                 "AreBeziersRestricted": True, "CurveCount": len(curves),
                 "TotalSegmentCount": segments, "TotalPointCount": segments + len(curves),
                 "UserDataCount": 0, "TotalUserDataSize": 0},
        "Curves": curves,
    }


_GLB_MAGIC, _GLB_JSON, _GLB_BIN = 0x46546C67, 0x4E4F534A, 0x004E4942
_FLOAT = 5126  # glTF's componentType for float32


def vrm_animation(cues: Sequence[VisemeCue], duration: float, fps: float = DEFAULT_FPS) -> bytes:
    """A VRM Animation (.vrma: binary glTF 2.0 with VRMC_vrm_animation 1.0) whose preset
    expressions aa ih ou ee oh follow the mouth: one node per expression, its weight the
    X of the node's translation (as the extension's spec says), keyed linearly on the
    frames where a weight moves. The extension's schema requires `humanoid`: it is there,
    with no bones, since the file moves none."""
    times, shapes = _shapes(cues, duration, fps)
    weights = np.array([s.vowels for s in shapes], dtype=np.float32)  # VOWELS = VRM1 order
    keyed, weights = _keys(times, weights)
    n = len(keyed)
    blob = bytearray(np.array(keyed, dtype=np.float32).tobytes())
    views = [{"buffer": 0, "byteOffset": 0, "byteLength": 4 * n}]
    accessors = [{"bufferView": 0, "componentType": _FLOAT, "count": n, "type": "SCALAR",
                  "min": [float(np.float32(keyed[0]))], "max": [float(np.float32(keyed[-1]))]}]
    channels, samplers = [], []
    for i, name in enumerate(VRM1_VOWELS):
        xyz = np.zeros((n, 3), dtype=np.float32)
        xyz[:, 0] = weights[:, i]
        views.append({"buffer": 0, "byteOffset": len(blob), "byteLength": xyz.nbytes})
        blob += xyz.tobytes()
        accessors.append({"bufferView": i + 1, "componentType": _FLOAT, "count": n,
                          "type": "VEC3", "min": xyz.min(axis=0).tolist(),
                          "max": xyz.max(axis=0).tolist()})
        samplers.append({"input": 0, "output": i + 1, "interpolation": "LINEAR"})
        channels.append({"sampler": i, "target": {"node": i, "path": "translation"}})
    gltf = {
        "asset": {"version": "2.0", "generator": "Lipsync Studio"},
        "extensionsUsed": ["VRMC_vrm_animation"],
        "scene": 0,
        "scenes": [{"nodes": list(range(len(VRM1_VOWELS)))}],
        "nodes": [{"name": name} for name in VRM1_VOWELS],
        "buffers": [{"byteLength": len(blob)}],
        "bufferViews": views,
        "accessors": accessors,
        "animations": [{"name": "lipsync", "channels": channels, "samplers": samplers}],
        "extensions": {"VRMC_vrm_animation": {
            "specVersion": "1.0",
            "humanoid": {"humanBones": {}},
            "expressions": {"preset": {name: {"node": i} for i, name in enumerate(VRM1_VOWELS)}},
        }},
    }
    text = json.dumps(gltf, separators=(",", ":")).encode()
    # GLB chunks are 4-byte aligned: JSON padded with spaces, the binary with zeros.
    text += b" " * (-len(text) % 4)
    blob += b"\0" * (-len(blob) % 4)
    total = 12 + 8 + len(text) + 8 + len(blob)
    return (struct.pack("<III", _GLB_MAGIC, 2, total) + struct.pack("<II", len(text), _GLB_JSON)
            + text + struct.pack("<II", len(blob), _GLB_BIN) + bytes(blob))


def cue_file(fmt: CueFormat, cues: Sequence[VisemeCue], duration: float, sound_file: str = "",
             fps: float = DEFAULT_FPS) -> bytes:
    """The bytes of a cue file of `fmt` (not a captions format: those hold words, see
    pipeline.voice.captions) for `cues` over `duration` seconds of `sound_file`."""
    if fmt.captions:
        raise ValueError(f"{fmt.name} files hold words: write them with pipeline.voice.captions")
    if fmt.name in ("ovr", "rhubarb"):
        text = json.dumps(cues_document(cues, sound_file, duration, fmt.name), indent=2) + "\n"
    elif fmt.name == "tsv":
        text = rhubarb_tsv(cues, duration)
    elif fmt.name == "xml":
        text = rhubarb_xml(cues, sound_file, duration)
    elif fmt.name == "dat":
        text = moho_dat(cues, duration, fps)
    elif fmt.name == "motion3":
        text = json.dumps(live2d_motion(cues, duration, fps), indent=2) + "\n"
    else:
        return vrm_animation(cues, duration, fps)
    return text.encode("utf-8")
