"""What letting the GIL go costs a thread that makes many short native calls while other
threads run Python, as the device's thread does between two runs (up to 129 CUDA calls
for a batch of 64: pipeline/infer/device_memory.py): 65 calls of libcudart's
cudaGetLastError (microseconds, no device work) through cuda.bindings, which lets the
GIL go for each, against through ctypes.PyDLL (device_memory.cudart, what ships), which
keeps it, beside 0, 2 and 8 threads spinning in Python, in the same run.

Last line of output: one JSON object.
Usage: python bench/gil_calls.py [--runs 20] [--out bench/results/gil_calls.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import describe, publish  # noqa: E402
from bench.thread_start import BUSY, busy_threads  # noqa: E402
from pipeline.infer.device_memory import cudart  # noqa: E402

CALLS = 65


def _ms(calls) -> float:
    start = time.perf_counter()
    for _ in range(CALLS):
        calls()
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from cuda.bindings import runtime

    library = cudart()
    ways = {"cuda_bindings_gil_let_go": runtime.cudaGetLastError,
            "pydll_gil_kept": library.cudaGetLastError}
    result: dict = {"machine": describe(), "calls": CALLS, "runs": args.runs, "busy_threads": {}}
    for busy in BUSY:
        with busy_threads(busy):
            time.sleep(0.02)
            times: dict[str, list[float]] = {name: [] for name in ways}
            for _ in range(args.runs):
                for name, call in ways.items():
                    times[name].append(_ms(call))
        result["busy_threads"][str(busy)] = {
            name: {"p50_ms": round(float(np.percentile(t, 50)), 3),
                   "max_ms": round(max(t), 3)} for name, t in times.items()}
        print(busy, result["busy_threads"][str(busy)], flush=True)
    publish(result, args.out)


if __name__ == "__main__":
    main()
