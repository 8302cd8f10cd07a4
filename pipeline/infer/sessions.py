"""The one way onnxruntime sessions are made: options fit for a real-time process, and
the execution provider (CPU, CUDA or TensorRT) asked for, or the reason it is not used.

Every model the app runs (the voice's three engines, the lip-shape model) goes through
`build_session`. A provider that this onnxruntime lacks, or that fails to start, is
never an error: the session runs on the next one down the chain TensorRT → CUDA → CPU,
and the returned `ProviderChoice` says which one and why.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import onnxruntime

from pipeline.infer.providers import PROVIDERS

log = logging.getLogger(__name__)

_ORT_NAMES = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}
_LABELS = {"cpu": "CPU", "cuda": "CUDA", "tensorrt": "TensorRT"}
# Fastest first. A session also holds every provider below its own: TensorRT hands the
# nodes it cannot build to CUDA, and either hands what it cannot run to the CPU.
_CHAIN = ("tensorrt", "cuda", "cpu")


@dataclass(frozen=True, slots=True)
class ProviderChoice:
    """Which execution provider a session runs on. `reason` says why that is not the one
    asked for (for "auto": why not a faster one), None when it is."""

    requested: str
    used: str  # "cpu", "cuda" or "tensorrt"
    reason: str | None


# Every CPU session of the process allocates from one onnxruntime arena, not one each.
# Each session's own arena grew, by doubling, to the largest run it had seen and kept it:
# the voice alone went from 387 to 424 MB of malloc in use over 60 of the soak's random
# speeches (a 33 MB step at the second long sentence in premium mode), and the app took a
# ~66 MB step at some point in each avatar-switching probe. Shared: 286 to 290 MB, RSS 364
# MB against 430, synthesis as fast (36.4-37.8 s against 38.1-38.8 s for the 60). With no
# arena at all: 223 to 227 MB but synthesis took 44.3-45.6 s. 2-vCPU VM, a process each.
# The lip-shape model's small runs share the arena's lock with the voice's: its step
# while a voice spoke took P99 0.41-0.46 ms on the shared arena and 0.41-0.46 ms on one
# of its own (P50 0.19-0.21 and 0.20-0.24; two processes each, 20 s of 10 ms steps, 2-vCPU VM).
# It is registered once per process: older onnxruntime refuses a second registration, and
# newer ones (1.32 here) replace the first, which would split the one arena in two.
_SHARED_ARENA_LOCK = threading.Lock()
_shared_arena_made = False


def _shared_cpu_arena() -> None:
    """Register the process's one CPU arena with onnxruntime, once."""
    global _shared_arena_made
    with _SHARED_ARENA_LOCK:
        if not _shared_arena_made:
            memory = onnxruntime.OrtMemoryInfo(
                "Cpu", onnxruntime.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                onnxruntime.OrtMemType.DEFAULT)
            # onnxruntime's defaults: no limit, grow by doubling, default first chunk.
            onnxruntime.create_and_register_allocator(memory, onnxruntime.OrtArenaCfg(0, 0, -1, -1))
            _shared_arena_made = True


def _options(threads: int, shared_arena: bool = False) -> onnxruntime.SessionOptions:
    """Options for a session that shares the machine with audio and render threads:
    `threads` intra-op threads (0: one per core), one inter-op thread, nodes run in
    order. Graph optimisation stays at onnxruntime's default, every fusion on. With
    `shared_arena` (CPU sessions), its CPU memory comes from the process's one arena.
    (Device sessions keep their own: their CUDA graphs were measured that way.)"""
    options = onnxruntime.SessionOptions()
    if shared_arena:
        _shared_cpu_arena()
        options.add_session_config_entry("session.use_env_allocators", "1")
    # Spinning workers steal the cores the audio and render threads need, and make runs
    # 2-4x slower once several sessions share the process.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    return options


def build_session(
    model: str | os.PathLike | bytes, provider: str = "cpu", threads: int = 1
) -> tuple[onnxruntime.InferenceSession, ProviderChoice]:
    """A session for `model` (a path or serialized bytes) on `provider`, one of PROVIDERS,
    falling back down the chain as the module says; `threads` sizes its intra-op pool.

    Raises ValueError for a provider not in PROVIDERS, and onnxruntime's own error when
    the model cannot be loaded even on the CPU.
    """
    if provider not in PROVIDERS:
        raise ValueError(f"provider must be one of {', '.join(PROVIDERS)}, got {provider!r}")
    first = 0 if provider == "auto" else _CHAIN.index(provider)
    available = onnxruntime.get_available_providers()
    missing, failed = [], []
    for name in _CHAIN[first:-1]:
        if _ORT_NAMES[name] not in available:
            missing.append(_LABELS[name])
            continue
        try:
            session = _session(model, threads, name)
        except (RuntimeError, ValueError) as exc:
            failed.append(f"{_LABELS[name]} could not start: {exc}")
            continue
        if _ORT_NAMES[name] in session.get_providers():
            return session, _chosen(provider, name, available, missing, failed)
        # A provider whose libraries (CUDA, cuDNN, TensorRT) fail to load is left out of
        # the session with a line in onnxruntime's log, not an error.
        failed.append(f"{_LABELS[name]} could not start (onnxruntime's log says why; "
                      "usually a missing CUDA, cuDNN or TensorRT library)")
    return _session(model, threads, "cpu"), _chosen(provider, "cpu", available, missing, failed)


_CHOICES: dict[str, ProviderChoice] = {}


def device_name() -> str | None:
    """The CUDA device's name (device 0, the one the sessions run on), None if
    cuda-python or a device is missing."""
    try:
        from cuda.bindings import runtime
    except ImportError:
        return None
    err, properties = runtime.cudaGetDeviceProperties(0)
    return properties.name.decode(errors="replace").strip("\x00") if int(err) == 0 else None


def choose_provider(provider: str = "auto") -> ProviderChoice:
    """The provider build_session would give a model asked for on `provider`, found once
    per process on a one-node model (a GPU provider starts in ~1 s; a real model's
    session on it would cost more, and its graph would be thrown away for per-shape
    ones: pipeline/infer/engine.py)."""
    if provider not in _CHOICES:
        if (provider != "cpu" and "CUDAExecutionProvider" in onnxruntime.get_available_providers()
                and hasattr(onnxruntime, "preload_dlls")):
            # The CUDA and cuDNN libraries of the [gpu] extra live in pip's nvidia-*
            # packages, which the dynamic loader does not search by itself.
            onnxruntime.preload_dlls()
        _CHOICES[provider] = build_session(_PROBE, provider)[1]
    return _CHOICES[provider]


def _probe_model() -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


_PROBE = _probe_model()


def _session(model: str | os.PathLike | bytes, threads: int, name: str
             ) -> onnxruntime.InferenceSession:
    # onnxruntime's own fallback would retry on the CPU and only print why.
    return onnxruntime.InferenceSession(
        model, sess_options=_options(threads, shared_arena=name == "cpu"),
        providers=[_ORT_NAMES[n] for n in _CHAIN[_CHAIN.index(name):]], enable_fallback=0)


def _chosen(requested: str, used: str, available: list[str], missing: list[str],
            failed: list[str]) -> ProviderChoice:
    reasons = failed
    if missing:
        reasons = [f"this onnxruntime has no {' or '.join(missing)} provider "
                   f"(it has {', '.join(available)})", *failed]
    choice = ProviderChoice(requested, used, "; ".join(reasons) or None)
    if choice.reason is not None:
        # Asked for by name, a provider not had is worth a warning; "auto" settling for
        # less is what it is for.
        (log.info if requested == "auto" else log.warning)(
            "inference on %s, not %s: %s", _LABELS[used], requested, choice.reason)
    return choice


# Set (to anything) to count the copy nodes in every device graph: each session then
# writes its placed graph to a temporary file, the voice's size, while it is built.
# The GPU test and bench/gpu.py set it; the app does not pay for it at warm-up.
COUNT_COPIES_ENV = "LIPSYNC_STUDIO_COUNT_COPY_NODES"


def static_session(model: bytes, used: str, threads: int, graph: bool, tf32: bool = False
                   ) -> tuple[onnxruntime.InferenceSession, int | None]:
    """A session for `model` (static shapes) on `used` ("cuda" or "tensorrt"), and the
    number of host↔device copy nodes onnxruntime put in it (None where it was not
    counted: COUNT_COPIES_ENV unset, or onnxruntime could not say).

    With `graph`, every node must run on the device (session creation fails otherwise)
    and the first run captures a CUDA graph that later runs replay: inputs and outputs
    must then be bound to the same device buffers at every run (I/O binding).
    TensorRT (untested here: it cannot be installed in this environment) keeps the
    engines it builds, one per static shape, in the user's cache directory.
    """
    options = _options(threads)
    # Errors only: it warns at every session that a saved optimized graph is machine-specific.
    options.log_severity_level = 3
    if graph:
        options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    providers = _device_providers(used, graph, tf32)
    if not os.environ.get(COUNT_COPIES_ENV):
        return onnxruntime.InferenceSession(model, sess_options=options, providers=providers,
                                            enable_fallback=0), None
    with tempfile.TemporaryDirectory(prefix="lipsync-ort-") as folder:
        # The graph as placed: the copy nodes are only visible there.
        optimized = Path(folder) / "optimized.onnx"
        options.optimized_model_filepath = str(optimized)
        session = onnxruntime.InferenceSession(model, sess_options=options, providers=providers,
                                               enable_fallback=0)
        copies = _count_copies(optimized)
    return session, copies


# How onnxruntime's CUDA provider picks each convolution's cuDNN algorithm when a session
# is built. Its default, EXHAUSTIVE, times every candidate there and keeps the fastest:
# two processes can then keep different algorithms, which sum in different orders, so the
# same voice's audio differs from run to run (the one unreproduced GPU-test failure:
# ultra mode with voice noise, more than 4e-4 from the CPU's audio once in 8 runs).
# HEURISTIC takes cuDNN's choice for the shape, the same in every process.
# bench/gpu.py times first audio with both in one run ("cudnn_algo_search").
CUDNN_CONV_ALGO_SEARCH = "HEURISTIC"


def _device_providers(used: str, graph: bool, tf32: bool = False) -> list:
    # TF32 rounds convolution inputs to 10-bit mantissas: the voice's durations (a
    # Ceil of a sum) would then drift from the CPU's, so it is off unless asked for
    # (`tf32`, an engine whose output is not a duration). One stream's convolutions are
    # small and bound by launches, not arithmetic, so full FP32 costs next to nothing
    # there; at a batch of 64 a run takes 12-14 ms on an H100 (bench/results/
    # gpu_h100_66a60f7.json, streams50's busy time per run).
    cuda = ("CUDAExecutionProvider", {"enable_cuda_graph": "1" if graph else "0",
                                      "use_tf32": "1" if tf32 else "0",
                                      "cudnn_conv_algo_search": CUDNN_CONV_ALGO_SEARCH})
    # Without the CPU provider listed: with `graph` the session must refuse a CPU node.
    cpu = [] if graph else ["CPUExecutionProvider"]
    if used == "cuda":
        return [cuda, *cpu]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lipsync-studio" / "tensorrt"
    cache.mkdir(parents=True, exist_ok=True)
    tensorrt = ("TensorrtExecutionProvider", {
        "trt_engine_cache_enable": "1", "trt_engine_cache_path": str(cache),
        "trt_timing_cache_enable": "1", "trt_timing_cache_path": str(cache),
        "trt_cuda_graph_enable": "1" if graph else "0",
    })
    return [tensorrt, cuda, *cpu]


def _count_copies(optimized: Path) -> int | None:
    import onnx
    from google.protobuf.message import DecodeError

    try:
        nodes = onnx.load(str(optimized), load_external_data=False).graph.node
    except (OSError, DecodeError):
        log.info("onnxruntime wrote no readable optimized graph; copy nodes not counted")
        return None
    return sum(node.op_type in ("MemcpyToHost", "MemcpyFromHost") for node in nodes)
