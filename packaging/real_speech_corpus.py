"""Training data from real recordings: the training split of bench/real_speech.

    python packaging/real_speech_corpus.py --out .cache/real_corpus.npz

Each clip of the split (voices never in the dev set, bench/real_speech/dev_set.py) is
labelled by pocketsphinx's phone alignment, the same way the dev set's reference is made,
and rendered like a synthetic utterance (packaging/lipsync_data.render: speed, padding,
the microphone augmentation, log-mel features, labels on the 10 ms grid) once per
strength in VARIANTS. The output has lipsync_data's corpus layout, so train_lipsync.py
reads it with --real.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "packaging"))

from lipsync_data import Utterance, render  # noqa: E402

from bench.real_speech import dev_set  # noqa: E402
from bench.real_speech.align import FRAME_S  # noqa: E402
from bench.real_speech.clip import SAMPLE_RATE  # noqa: E402

# Strengths of the augmentation, as for the synthetic corpus: a mild copy and a harsh one.
VARIANTS = (0.3, 1.0)
# A reference frame j is pocketsphinx's window [10 j, 10 j + 25.6) ms: it stands for the
# instant at its centre, 10 j + 12.8 ms, so its span runs 5 ms either side of that.
_CENTRE_S = 0.0128


def spans(reference: np.ndarray) -> list[tuple[int, float, float]]:
    """The reference's runs of one viseme as contiguous (viseme, start s, end s)."""
    change = np.flatnonzero(np.diff(reference)) + 1
    starts = np.concatenate([[0], change])
    edges = np.maximum(0.0, np.concatenate([starts, [len(reference)]]) * FRAME_S
                       + _CENTRE_S - FRAME_S / 2)
    return [(int(reference[a]), float(edges[k]), float(edges[k + 1]))
            for k, a in enumerate(starts)]


def _job(args):
    index, item, seed = args
    rng = np.random.default_rng(seed)
    utt = Utterance(item.clip.audio, SAMPLE_RATE, spans(item.reference))
    return index, [render(utt, rng, s) for s in VARIANTS]


def build(out: Path, seed: int, workers: int) -> dict:
    import multiprocessing as mp

    aligned, info = dev_set.load("train", workers=workers)
    jobs = [(i, a, seed * 1_000_003 + i) for i, a in enumerate(aligned)]
    done: dict[int, list] = {}
    with mp.get_context("spawn").Pool(workers) as pool:
        for index, result in pool.imap_unordered(_job, jobs, chunksize=4):
            done[index] = result
    items = [r for i in sorted(done) for r in done[i]]
    lengths = np.array([len(f) for f, _, _ in items], np.int64)
    np.savez(out, features=np.concatenate([f for f, _, _ in items]),
             labels=np.concatenate([lab[: len(f)] for f, lab, _ in items]),
             openness=np.concatenate([o[: len(f)] for f, _, o in items]),
             lengths=lengths, sources=np.array(["real"] * len(items)))
    return {"clips": len(aligned), "utterances": len(items), "frames": int(lengths.sum()),
            "hours": float(lengths.sum()) * FRAME_S / 3600, "speakers": info["speakers"],
            "seconds": info["seconds"], "skipped": len(info["skipped"]),
            "sources_failed": info["sources_failed"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "real_corpus.npz")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    print(json.dumps(build(args.out, args.seed, args.workers)))


if __name__ == "__main__":
    main()
