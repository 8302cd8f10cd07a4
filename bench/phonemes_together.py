"""Fifty voices started together, up to their first engine request: each thread prepares
its text, reads its first sentence with espeak-ng and lays out its ids
(pipeline.voice.phonemes), the Python a stream does before the device lane can run
anything of it (bench/gpu.py's `first_run_after_ms`). With espeak-ng read through
piper's C bridge (the GIL held for the whole read) against through ctypes (what ships:
the GIL let go), alternated in one run. A thread that wakes every millisecond stands for
the device lane, which needs the GIL back after every run: how late it woke while the
fifty ran.

Last line of output: one JSON object.
Usage: python bench/phonemes_together.py [--runs 10] [--voices 50] [--out bench/results/phonemes_together.json]
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from piper import espeakbridge  # noqa: E402

from bench.machine import describe, publish  # noqa: E402
from bench.tts_latency import TEXTS  # noqa: E402
from pipeline.voice.phonemes import spoken_sentences, symbol_ids  # noqa: E402
from pipeline.voice.streaming_tts import StreamingTTS  # noqa: E402

TICK_S = 0.001


def bridge_as_shipped():
    """piper's own espeakbridge module, loaded again under another name: its get_phonemes
    is the C function pipeline.voice.phonemes replaced (loading it under its own name
    would hand back the module in use, its functions reset)."""
    name = "as_shipped.espeakbridge"
    loader = importlib.machinery.ExtensionFileLoader(name, espeakbridge.__file__)
    return importlib.util.module_from_spec(
        importlib.util.spec_from_file_location(name, espeakbridge.__file__, loader=loader))


def _together(tts: StreamingTTS, text: str, voices: int) -> dict:
    """`voices` threads through text preparation, the first sentence's phonemes and its
    ids, started by a barrier, beside a thread ticking every TICK_S: ms from the start to
    each thread's ids, and how late the ticks came."""
    barrier = threading.Barrier(voices + 1)
    done = [0.0] * voices
    stop = threading.Event()
    late: list[float] = []

    def one(i: int) -> None:
        barrier.wait()
        prepared = tts.prepare(text)
        _, phonemes = next(spoken_sentences(tts._voice, prepared.text))
        symbol_ids(phonemes, tts._voice.config.phoneme_id_map)
        done[i] = time.perf_counter()

    def tick() -> None:
        while not stop.is_set():
            due = time.perf_counter() + TICK_S
            time.sleep(TICK_S)
            late.append((time.perf_counter() - due) * 1000)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(voices)]
    for thread in threads:
        thread.start()
    ticker = threading.Thread(target=tick)
    ticker.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    stop.set()
    ticker.join()
    ready = [(t - start) * 1000 for t in done]
    return {"last_ms": max(ready), "p50_ms": float(np.percentile(ready, 50)),
            "tick_late_max_ms": max(late, default=0.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--voices", type=int, default=50)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    tts = StreamingTTS(provider="cpu")
    text = TEXTS["medium20"]
    ours, theirs = espeakbridge.get_phonemes, bridge_as_shipped().get_phonemes
    ways = {"bridge_gil_held": theirs, "ctypes_gil_free": ours}
    rows: dict[str, list[dict]] = {name: [] for name in ways}
    try:
        for run in range(args.runs + 1):
            for name, get in ways.items():
                espeakbridge.get_phonemes = get
                row = _together(tts, text, args.voices)
                if run:  # the first round warms both up
                    rows[name].append(row)
                    print(name, {k: round(v, 2) for k, v in row.items()}, flush=True)
    finally:
        espeakbridge.get_phonemes = ours

    def median(name: str, key: str) -> float:
        return round(float(np.median([r[key] for r in rows[name]])), 2)

    keys = ("last_ms", "p50_ms", "tick_late_max_ms")
    result = {"machine": describe(), "voices": args.voices, "runs": args.runs,
              "text": text, "median_over_runs": {n: {k: median(n, k) for k in keys} for n in ways},
              "runs_ms": {n: [{k: round(v, 2) for k, v in r.items()} for r in rows[n]] for n in ways}}
    result["last_ratio_ctypes_over_bridge"] = round(
        median("ctypes_gil_free", "last_ms") / median("bridge_gil_held", "last_ms"), 3)
    publish(result, args.out)


if __name__ == "__main__":
    main()
