"""The one session builder against the real onnxruntime: the real-time options, CPU
sessions that run, and CUDA/TensorRT asked for where this onnxruntime lacks them."""

import json

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

from pipeline.infer.providers import PROVIDERS
from pipeline.infer.sessions import ProviderChoice, _options, build_session
from pipeline.lipsync.model import DEFAULT_MODEL
from tests.harness.services import run_in_child

AVAILABLE = onnxruntime.get_available_providers()
GPU = {"cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider"}


def _doubler() -> bytes:
    """A one-node model, serialized: y = x + x."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "doubler", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


@pytest.mark.parametrize("threads", [1, 2, 0])
def test_cpu_sessions_get_the_real_time_options(threads):
    session, choice = build_session(_doubler(), "cpu", threads)
    assert choice == ProviderChoice("cpu", "cpu", None)
    assert session.get_providers() == ["CPUExecutionProvider"]
    options = session.get_session_options()
    # The options both the voice and the lip-shape model ran with before they shared them.
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == threads
    assert options.inter_op_num_threads == 1
    assert options.execution_mode == onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    assert options.graph_optimization_level == onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert options.get_session_config_entry("session.use_env_allocators") == "1"
    (y,) = session.run(None, {"x": np.array([1, 2, 3], np.float32)})
    np.testing.assert_array_equal(y, [2, 4, 6])


def test_device_sessions_keep_arenas_of_their_own():
    # Their CUDA graphs were measured with each session's own arena; the entry is absent.
    with pytest.raises(RuntimeError):
        _options(1).get_session_config_entry("session.use_env_allocators")


def test_a_model_file_is_loaded_by_path():
    session, choice = build_session(str(DEFAULT_MODEL))
    assert choice.used == "cpu" and choice.reason is None
    assert {i.name for i in session.get_inputs()} >= {"feats", "state"}


@pytest.mark.parametrize("provider", sorted(GPU))
def test_a_gpu_provider_this_onnxruntime_lacks_falls_back_to_the_cpu_and_says_why(provider):
    if GPU[provider] in AVAILABLE:
        pytest.skip(f"this onnxruntime has {GPU[provider]}")
    session, choice = build_session(_doubler(), provider)
    assert (choice.requested, choice.used) == (provider, "cpu")
    label = {"cuda": "CUDA", "tensorrt": "TensorRT"}[provider]
    assert f"no {label}" in choice.reason
    # The reason names what this onnxruntime does have, so the fix is plain.
    assert "CPUExecutionProvider" in choice.reason
    assert session.get_providers() == ["CPUExecutionProvider"]
    (y,) = session.run(None, {"x": np.array([0.5, 1, -1], np.float32)})
    np.testing.assert_array_equal(y, [1, 2, -2])


def test_tensorrt_falls_back_through_cuda():
    if set(GPU.values()) & set(AVAILABLE):
        pytest.skip("this onnxruntime has a GPU provider")
    _, choice = build_session(_doubler(), "tensorrt")
    assert "no TensorRT or CUDA provider" in choice.reason


def test_auto_takes_the_fastest_provider_there_is():
    _, choice = build_session(_doubler(), "auto")
    fastest = next((name for name in ("tensorrt", "cuda") if GPU[name] in AVAILABLE), "cpu")
    assert choice.requested == "auto"
    assert choice.used == fastest or "could not start" in choice.reason
    if fastest == "cpu":
        assert "no TensorRT or CUDA provider" in choice.reason

def test_an_unknown_provider_is_refused():
    assert PROVIDERS == ("auto", "cpu", "cuda", "tensorrt")
    with pytest.raises(ValueError, match="provider must be one of auto, cpu, cuda, tensorrt"):
        build_session(_doubler(), "gpu")


LONG_SENTENCES = (
    "Welcome back to the stream everyone, today we are building a tiny robot out of paper "
    "and glue, and it is going to be great fun for all of us here.",
    "Please remember to follow the channel if you enjoy the show, because the weather "
    "outside is cold and I made a big cup of cocoa for the long night ahead.",
    "Thanks for the raid everyone who just joined, let me read the donation message from "
    "my friend quickly before the next round starts in a minute or two.")


def test_the_voice_engines_draw_on_one_arena():
    """Each CPU session's own onnxruntime arena doubled to the largest run it had seen and
    kept it: over these three long sentences in premium mode the voice's malloc in use
    grew 37.1 MB (a doubling step of 32 MB or more); from the process's one arena, 4.1 MB
    (2-vCPU VM). The bound is half a step. In a process of its own, so that no earlier
    test has grown the arena already."""
    _, grown = run_in_child("tests.test_sessions:voice_malloc_growth", timeout=120)
    assert grown["mb"] < 16.0, grown


def voice_malloc_growth() -> None:
    """(In a child) the voice's malloc growth over LONG_SENTENCES in premium mode."""
    from app.heap import heap_figures
    from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS

    tts = StreamingTTS()
    tts.warm_up()
    before = heap_figures()["malloc_mb"]
    for text in LONG_SENTENCES:
        for _ in tts.stream(text, LATENCY_MODES["premium"]):
            pass
    print(json.dumps({"mb": heap_figures()["malloc_mb"] - before}))
