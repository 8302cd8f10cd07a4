"""How long handing work to a thread holds the caller while other Python threads are busy,
as an API server's streams keep it: `threading.Thread.start` (a thread per stream, the
code before pipeline/core/started_threads.py) against `StartedThreads.submit` (threads
started ahead), in the same run, beside 0, 2 and 8 threads spinning in Python. The
caller is the server's event loop: while it is held, no other client is served. Also
how long until the job runs, which the GIL sets for both.

Last line of output: one JSON object.
Usage: python bench/thread_start.py [--runs 30] [--out bench/results/thread_start.json]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import describe, publish  # noqa: E402
from pipeline.core.started_threads import StartedThreads  # noqa: E402

BUSY = (0, 2, 8)


@contextmanager
def busy_threads(count: int) -> Iterator[None]:
    """`count` threads spinning in Python (holding the GIL all they can) while inside."""
    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            x += 1

    spinners = [threading.Thread(target=spin, daemon=True) for _ in range(count)]
    for spinner in spinners:
        spinner.start()
    try:
        yield
    finally:
        stop.set()
        for spinner in spinners:
            spinner.join()


def _hand_over(hand_over) -> tuple[float, float]:
    """ms the call `hand_over(job)` took, and ms from it until the job ran."""
    ran = threading.Event()
    start = time.perf_counter()
    hand_over(ran.set)
    returned = time.perf_counter()
    ran.wait()
    return (returned - start) * 1e3, (time.perf_counter() - start) * 1e3


def busy_bench(name: str, runs: int) -> tuple[argparse.Namespace, dict]:
    """The command line (--runs, --out) and the report's head of a bench run beside BUSY
    busy threads (this one and bench/stream_voice.py)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    return args, {"bench": name, "machine": describe(),
                  "switch_interval_ms": sys.getswitchinterval() * 1000, "runs": args.runs}


def main() -> None:
    args, report = busy_bench("thread_start", 30)
    workers = StartedThreads(1, "bench-worker")
    for busy in BUSY:
        started, submitted = [], []
        with busy_threads(busy):
            for _ in range(args.runs):  # interleaved, so both meet the same load
                started.append(_hand_over(lambda job: threading.Thread(target=job).start()))
                submitted.append(_hand_over(workers.submit))
        report[f"busy_{busy}"] = {
            f"{name}_{part}": {"p50_ms": round(float(np.percentile(v, 50)), 3),
                               "p99_ms": round(float(np.percentile(v, 99)), 3),
                               "max_ms": round(max(v), 3)}
            for name, times in (("thread_start", started), ("started_threads_submit", submitted))
            for part, v in (("caller_held", [t[0] for t in times]),
                            ("until_job_ran", [t[1] for t in times]))}
        print(busy, report[f"busy_{busy}"], flush=True)
    workers.close()
    publish(report, args.out)


if __name__ == "__main__":
    main()
