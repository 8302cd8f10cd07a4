"""Mic → mouth latency through the real capture path: speech played into a JACK dummy
server's capture port, read by the app's AudioInput (PortAudio), analysed by the
lip-shape model in each latency mode, and by the volume gate (the PNGtuber baseline)
in the same run.

Latency is measured per pose: from the ADC instant of the audio the pose describes to
the moment the pose is published for the frame producer (it makes the slot's frame
within its next poll, ≤ 4 ms). It includes the mode's lookahead, which a causal model
must wait for.

Per 10 ms hop two costs are timed on the mic thread: inference (`infer_*`, the network's
onnxruntime run, what the issue's 1 ms goal is about) and the whole analysis of the hop
(`hop_*`: resampling, log-mel features, inference and smoothing).

Usage: python bench/mic_latency.py [--seconds 12]
                                   [--out bench/results/mic_latency.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import describe, publish  # noqa: E402

SPEECH = ("Hello everyone and welcome back. Today we are building a paper robot, "
          "five big boxes of glue, and a very patient cat. Thank you for watching the stream!")


class TimedAnalyser:
    """Wraps an analyser and records the wall and thread CPU time of every call, per hop
    produced, and the wall time of each of its model's inference runs."""

    def __init__(self, analyser) -> None:
        self.analyser = analyser
        self.costs: list[float] = []
        self.cpu_costs: list[float] = []
        self.infer_costs: list[float] = []
        model = getattr(analyser, "model", None)
        if model is not None:
            advance = model._advance

            def timed_advance(feats):
                started = time.perf_counter()
                advance(feats)
                self.infer_costs.append(time.perf_counter() - started)

            model._advance = timed_advance

    def __call__(self, block: np.ndarray, rate: int):
        started, cpu_started = time.perf_counter(), time.thread_time()
        poses = self.analyser(block, rate)
        if poses:
            self.costs.append((time.perf_counter() - started) / len(poses))
            self.cpu_costs.append((time.thread_time() - cpu_started) / len(poses))
        return poses


def _speech(rate: int) -> np.ndarray:
    from pipeline.audio.resample import resample
    from pipeline.core.modes import PREMIUM
    from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS

    tts = StreamingTTS()
    audio = np.concatenate([s.audio for s in tts.synthesize(SPEECH, LATENCY_MODES[PREMIUM])])
    return 0.5 * resample(audio, tts.sample_rate, rate)


def _run(analyser, speech: np.ndarray, seconds: float) -> dict:
    from pipeline.audio.input import AudioInput
    from pipeline.lipsync.mic import MicLipSync
    from tests.harness.jack_recorder import JackPlayer

    timed = TimedAnalyser(analyser)
    mic = AudioInput("system", gate_db=None)
    mic.start()
    stage = MicLipSync(mic, timed, lambda media: media)
    stage.start()
    player = JackPlayer(np.tile(speech, int(np.ceil(seconds * 48000 / len(speech)))))
    player.start()
    time.sleep(seconds)
    player.stop()
    stage.stop()
    mic.close()
    stats = stage.latency()
    costs = np.array(timed.costs) * 1000
    cpu_costs = np.array(timed.cpu_costs) * 1000
    infer = {}
    if timed.infer_costs:
        infer_costs = np.array(timed.infer_costs) * 1000
        infer = {"infer_p50_ms": round(float(np.percentile(infer_costs, 50)), 3),
                 "infer_p99_ms": round(float(np.percentile(infer_costs, 99)), 3)}
    return {
        "latency_p50_ms": round(stats.p50_ms, 2),
        "latency_p99_ms": round(stats.p99_ms, 2),
        "poses": stats.count,
        **infer,
        "hop_p50_ms": round(float(np.percentile(costs, 50)), 3),
        "hop_p99_ms": round(float(np.percentile(costs, 99)), 3),
        # The same hops in the mic thread's own CPU time: what the analysis costs,
        # without the waits for the GIL and the cores that the wall-clock figures include.
        "hop_cpu_p50_ms": round(float(np.percentile(cpu_costs, 50)), 3),
        "hop_cpu_p99_ms": round(float(np.percentile(cpu_costs, 99)), 3),
        "obs_sync_offset_ms": stage.sync_offset_ms,
        "capture_overflows": mic.overflows,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from tests.harness.services import JackServer

    jack_server = JackServer(period=256)
    from pipeline.audio.devices import portaudio_released, reinitialize_portaudio

    reinitialize_portaudio()  # PortAudio lists host APIs once: now it sees the new server
    from pipeline.lipsync.mic import ModelAnalyser, VolumeGate
    from pipeline.core.modes import MODES_MS
    from pipeline.lipsync.model import LipShapeModel

    speech = _speech(jack_server.rate)
    modes = {}
    for mode, lookahead in MODES_MS.items():
        model = LipShapeModel(lookahead_ms=lookahead)
        result = _run(ModelAnalyser(model), speech, args.seconds)
        result["lookahead_ms"] = lookahead
        result["goal_p50_ms"] = 10 + lookahead
        result["goal_p99_ms"] = 20 + lookahead
        result["meets_goals"] = (result["latency_p50_ms"] <= 10 + lookahead
                                 and result["latency_p99_ms"] <= 20 + lookahead
                                 and result["infer_p99_ms"] <= 1.0)
        # Stricter than the goal: the whole hop's analysis inside the same 1 ms.
        result["hop_p99_within_1ms"] = result["hop_p99_ms"] <= 1.0
        modes[mode] = result
    gate = _run(VolumeGate(), speech, args.seconds)
    with portaudio_released():
        jack_server.stop()

    evaluation = Path(__file__).parent / "results" / "lipsync_eval.json"
    result = {
        "bench": "mic_latency",
        # The niceness is recorded: on the shared 2-core VM the run may be started with
        # `nice -n -15` so other work's load does not swamp the scheduling it measures.
        "machine": describe(f"JACK dummy 48 kHz/256, nice {os.nice(0)}"),
        "seconds_per_mode": args.seconds,
        "modes": modes,
        "baseline_volume_gate": gate,
        "evaluation": json.loads(evaluation.read_text()) if evaluation.exists() else None,
    }
    publish(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
