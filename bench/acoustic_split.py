"""Where the acoustic engine's time goes (issue 25: first audio under 5 ms): the engine
and its two halves timed apart on the device the engines run on: the text encoder (ids ->
hidden states, prior mean and log-scale) and the stochastic duration predictor (hidden
states -> frames per id), each built as the app builds an engine (static shapes, a CUDA
graph where it can, its graph rewrites made), at the first window's bucket. The whole
engine is the baseline; the whole engine with its spline couplings as exported (Engine's
`rewrites` without "compact_splines"), and with neither rewrite, what each gains.

The engines are timed run by run in turn. Usage: python bench/acoustic_split.py [RUNS]
[auto|cpu]. Last line: one JSON object.
"""
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx.utils import Extractor  # noqa: E402

from bench.machine import describe  # noqa: E402
from pipeline.infer.engine import REWRITES, Engine, cpu_graph  # noqa: E402
from pipeline.infer.static_graph import NOISE_INPUT, noise_as_input  # noqa: E402
from pipeline.voice import streaming_tts as st  # noqa: E402
from pipeline.voice.voice_files import BUNDLED_VOICE  # noqa: E402

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
provider = sys.argv[2] if len(sys.argv) > 2 else "auto"
HIDDEN, MASK = "/enc_p/encoder/Mul_2_output_0", "/enc_p/Cast_1_output_0"
model = onnx.load(str(BUNDLED_VOICE.model))
ex = Extractor(model)
bucket = st.BUCKETS[0]
acoustic = st.stage_graphs(BUNDLED_VOICE, speakers=False)[0]["acoustic"]
# name -> (the engine's name, its graph, its rewrites)
specs = {
    "whole acoustic": ("acoustic", acoustic, REWRITES),
    "whole acoustic, splines as exported": ("acoustic", acoustic, ("fused_layer_norms",)),
    "whole acoustic, as exported": ("acoustic", acoustic, ()),
    "encoder": ("encoder", ex.extract_model([st._IDS, st._ID_LENGTHS],
                                            [HIDDEN, st._PRIOR_MEAN, st._PRIOR_LOG_SCALE]), REWRITES),
    # The id mask is fed, not taken from the encoder: on a GPU every output needs a
    # static shape, and the mask's has none.
    "duration predictor": ("dp", noise_as_input(ex.extract_model(
        [HIDDEN, MASK, st._SCALES], [st._ID_FRAMES])), REWRITES),
}
engines = {name: Engine(engine, graph, provider, 1, (1,), rewrites=rewrites)
           for name, (engine, graph, rewrites) in specs.items()}
ids = np.zeros((1, bucket), np.int64)
ids[0, :20] = np.arange(1, 21)
lengths = np.array([20], np.int64)
scales = np.array([0.667, 1.0, 0.8], np.float32)
noise = np.random.default_rng(0).standard_normal((1, 2, bucket), np.float32)
hidden, _, _ = engines["encoder"].run({st._IDS: ids, st._ID_LENGTHS: lengths})
mask = (np.arange(bucket) < 20).astype(np.float32)[None, None]
whole = {st._IDS: ids, st._ID_LENGTHS: lengths, st._SCALES: scales, NOISE_INPUT: noise}
feeds = {
    "whole acoustic": whole,
    "whole acoustic, splines as exported": whole,
    "whole acoustic, as exported": whole,
    "encoder": {st._IDS: ids, st._ID_LENGTHS: lengths},
    "duration predictor": {HIDDEN: hidden, MASK: mask, st._SCALES: scales, NOISE_INPUT: noise},
}
out = {"machine": describe(os.environ.get("BENCH_DEVICE", "")), "bucket": bucket,
       "on_device": engines["encoder"].on_device, "rewrites": REWRITES, "nodes": {}}
times: dict[str, list[float]] = {name: [] for name in engines}
for name, engine in engines.items():
    out["nodes"][name] = len(cpu_graph(specs[name][1], engine.rewrites).graph.node)
    for _ in range(5):
        engine.run(feeds[name])
# Run by run in turn, so a slow stretch of the machine falls on every engine alike.
for _ in range(runs):
    for name, engine in engines.items():
        start = time.perf_counter()
        engine.run(feeds[name])
        times[name].append((time.perf_counter() - start) * 1e3)
for name, engine in engines.items():
    out[name] = {"p50_ms": round(float(np.median(times[name])), 3),
                 "p99_ms": round(float(np.percentile(times[name], 99)), 3),
                 "graphs": engine.graphs if engine.on_device else None}
print(json.dumps(out))
