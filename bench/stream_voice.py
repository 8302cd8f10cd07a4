"""What making a voice for one request holds its caller, as the API's handler makes one
per /stream request on its event loop: StreamingTTS(seed=...) (the files checked and
read again: ~15 stat calls, each letting go of the GIL and waiting to take it back)
against StreamingTTS.with_seed (the same voice's files, settings and engines, noise of
its own), in the same run, beside 0, 2 and 8 threads spinning in Python, as 50 starting
streams keep the GIL busy. Both make voices that speak the same for a seed
(tests/test_streaming_tts.py).

Last line of output: one JSON object.
Usage: python bench/stream_voice.py [--runs 200] [--out bench/results/stream_voice.json]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import publish  # noqa: E402
from bench.thread_start import BUSY, busy_bench, busy_threads  # noqa: E402
from pipeline.voice.streaming_tts import StreamingTTS  # noqa: E402


def main() -> None:
    args, report = busy_bench("stream_voice", 200)
    loaded = StreamingTTS()
    ways = {"constructor": lambda seed: StreamingTTS(seed=seed), "with_seed": loaded.with_seed}
    for busy in BUSY:
        held: dict[str, list[float]] = {way: [] for way in ways}
        with busy_threads(busy):
            for seed in range(args.runs):  # interleaved, so both meet the same load
                for way, make in ways.items():
                    start = time.perf_counter()
                    make(seed)
                    held[way].append((time.perf_counter() - start) * 1e3)
        report[f"busy_{busy}"] = {
            way: {"p50_ms": round(float(np.percentile(ms, 50)), 3),
                  "p99_ms": round(float(np.percentile(ms, 99)), 3),
                  "mean_ms": round(float(np.mean(ms)), 3)}
            for way, ms in held.items()}
        print(busy, report[f"busy_{busy}"], flush=True)
    publish(report, args.out)


if __name__ == "__main__":
    main()
