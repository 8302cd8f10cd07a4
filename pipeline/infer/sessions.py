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
from dataclasses import dataclass

import onnxruntime

log = logging.getLogger(__name__)

# What a setting or an argument may ask for; "auto" is the fastest the machine has.
PROVIDERS: tuple[str, ...] = ("auto", "cpu", "cuda", "tensorrt")
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


def _options(threads: int) -> onnxruntime.SessionOptions:
    """Options for a session that shares the machine with audio and render threads:
    `threads` intra-op threads (0: one per core), one inter-op thread, nodes run in
    order. Graph optimisation stays at onnxruntime's default, every fusion on."""
    options = onnxruntime.SessionOptions()
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


def _session(model: str | os.PathLike | bytes, threads: int, name: str
             ) -> onnxruntime.InferenceSession:
    # onnxruntime's own fallback would retry on the CPU and only print why.
    return onnxruntime.InferenceSession(
        model, sess_options=_options(threads),
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
