"""Cue files read back as their formats' specs lay them out, for the tests of what we write
(tests/test_cue_formats.py, tests/test_fuzz_cues.py): Rhubarb's mouth shapes, Moho's
switch data, Live2D motion3 segments, glTF's binary container and a VRM animation's
expression weights."""

from __future__ import annotations

import json
import struct

import numpy as np

from pipeline.core.mouth_shapes import VRM1_VOWELS

# Rhubarb Lip Sync's mouth shapes: the basic six, the extended three.
RHUBARB_SHAPES = set("ABCDEFGHX")


def moho_switches(text):
    """Moho switch data's (frame, shape) pairs, checked as its spec lays them out."""
    lines = text.splitlines()
    assert lines[0] == "MohoSwitch1"
    pairs = [(int(frame), shape) for frame, shape in (line.split(" ") for line in lines[1:])]
    frames = [f for f, _ in pairs]
    assert frames[0] == 1 and frames == sorted(set(frames))
    assert {s for _, s in pairs} <= RHUBARB_SHAPES
    return pairs


def motion3_points(segments):
    """The spec's reading of a flat Segments array: (points, segment count); each
    identifier is followed by 1 point (linear, stepped, inverse stepped) or 3 (bézier)."""
    points, i, count = [(segments[0], segments[1])], 2, 0
    while i < len(segments):
        kind = segments[i]
        assert kind in (0, 1, 2, 3)
        n = 3 if kind == 1 else 1
        points += [(segments[i + 1 + 2 * k], segments[i + 2 + 2 * k]) for k in range(n)]
        i += 1 + 2 * n
        count += 1
    assert i == len(segments)
    return points, count


def glb_chunks(data: bytes):
    """glTF 2.0's binary container read as its spec lays it out: (JSON, BIN chunk)."""
    magic, version, length = struct.unpack_from("<III", data)
    assert (magic, version, length) == (0x46546C67, 2, len(data))
    json_length, json_type = struct.unpack_from("<II", data, 12)
    assert json_type == 0x4E4F534A and json_length % 4 == 0
    document = json.loads(data[20:20 + json_length])
    bin_length, bin_type = struct.unpack_from("<II", data, 20 + json_length)
    assert bin_type == 0x004E4942 and bin_length % 4 == 0
    blob = data[28 + json_length:]
    assert len(blob) == bin_length and document["buffers"][0]["byteLength"] <= bin_length
    return document, blob


def _accessor(document, blob, index):
    accessor = document["accessors"][index]
    view = document["bufferViews"][accessor["bufferView"]]
    assert accessor["componentType"] == 5126  # float32
    width = {"SCALAR": 1, "VEC3": 3}[accessor["type"]]
    assert view["byteLength"] == 4 * width * accessor["count"]
    values = np.frombuffer(blob, np.float32, width * accessor["count"], view["byteOffset"])
    values = values.reshape(accessor["count"], width)
    assert accessor["min"] == values.min(axis=0).tolist()
    assert accessor["max"] == values.max(axis=0).tolist()
    return values


def vrma_weights(document, blob):
    """Each preset expression's weight over time, as a VRM player reads the file: the X
    of its node's animated translation, interpolated linearly."""
    extension = document["extensions"]["VRMC_vrm_animation"]
    assert "VRMC_vrm_animation" in document["extensionsUsed"]
    assert extension["specVersion"] == "1.0" and "humanBones" in extension["humanoid"]
    nodes = {name: e["node"] for name, e in extension["expressions"]["preset"].items()}
    assert list(nodes) == list(VRM1_VOWELS)
    animation = document["animations"][0]
    curves = {}
    for channel in animation["channels"]:
        assert channel["target"]["path"] == "translation"
        sampler = animation["samplers"][channel["sampler"]]
        assert sampler["interpolation"] == "LINEAR"
        times = _accessor(document, blob, sampler["input"])[:, 0]
        xyz = _accessor(document, blob, sampler["output"])
        assert np.all(np.diff(times) > 0) and times[0] == 0.0
        assert np.all(xyz[:, 1:] == 0) and np.all((0 <= xyz[:, 0]) & (xyz[:, 0] <= 1))
        curves[channel["target"]["node"]] = (times, xyz[:, 0])
    return {name: curves[node] for name, node in nodes.items()}
