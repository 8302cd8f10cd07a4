"""The real-speech dev set and the real-voice training split, fetched and aligned.

    python -m bench.real_speech.dev_set                 # dev set summary (JSON)
    python -m bench.real_speech.dev_set --split train   # the training split's

Every source's clips (bench.real_speech.sources, .fotaq, .pocketsphinx_clips) are
split by speaker, so no voice of the dev set is ever trained on:
- Flight of the Amazon Queen's characters: DEV_CHARACTERS (4 women, 4 men, chosen before
  any model was scored on them) to the dev set, at most DEV_CHARACTER_CAP_S each; every
  other character to training, at most TRAIN_SPEAKER_CAP_S each. The game credits 13
  voice artists for its 37 characters without saying who voices whom, so a dev
  character's actor may also voice a training character: a leak this split cannot rule
  out, and the reason the game is capped to under two thirds of the dev set.
- TRAIN_SPEAKERS (Asterisk's one voice, 23 minutes) to training.
- Every other speaker to the dev set, at most DEV_SPEAKER_CAP_S each, so that no one
  voice decides the figures. Each clip is phone-aligned by
pocketsphinx (bench.real_speech.align, cached); a clip whose transcript cannot be
aligned is left out and named in the summary with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.real_speech import pocketsphinx_clips
from bench.real_speech.align import HOP, AlignmentError, cached_phones, reference
from bench.real_speech.clip import Clip

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "real_speech"

# No dev speaker may carry more than 90 s (15% of the 10-minute floor of issue 24).
DEV_SPEAKER_CAP_S = 90.0
DEV_CHARACTERS: frozenset[str] = frozenset(
    f"fotaq/{c}" for c in ("faye", "mary-lou", "azura", "naomi",
                           "frank", "sparky", "chief", "witch-doctor"))
DEV_CHARACTER_CAP_S = 60.0
# Joe alone is 6,000 of the game's 15,100 s: capped, the game's 29 training characters
# and Asterisk's voice give 3,077 clips, 7,936 s, and Joe is an eighth of it.
TRAIN_SPEAKER_CAP_S = 1000.0
# Voices trained on, never scored: the one-voice bulk (Asterisk's one woman).
TRAIN_SPEAKERS: frozenset[str] = frozenset({"asterisk/allison"})


@dataclass(frozen=True)
class Aligned:
    """A clip and its reference: the viseme index of each 10 ms frame (len(audio) // HOP)."""

    clip: Clip
    reference: np.ndarray


def _sources() -> dict[str, Callable[[Path], list[Clip]]]:
    from bench.real_speech import fotaq, sources

    return {"pocketsphinx": pocketsphinx_clips.clips, **sources.SOURCES, "fotaq": fotaq.clips}


def gather(cache: Path = CACHE, names: list[str] | None = None) -> tuple[list[Clip], dict]:
    """Every source's clips, and {source: reason} for the sources that could not be fetched."""
    clips, failed = [], {}
    for name, fetch in _sources().items():
        if names is not None and name not in names:
            continue
        try:
            clips += fetch(cache / name)
        except Exception as error:  # a source that cannot be fetched is reported, not fatal
            failed[name] = f"{type(error).__name__}: {error}"
    return clips, failed


def split(clips: list[Clip]) -> tuple[list[Clip], list[Clip]]:
    """(dev, train): by speaker, each speaker's first clips up to its cap, in clip order."""
    dev, train = [], []
    used: dict[str, float] = defaultdict(float)
    for clip in clips:
        if clip.speaker in TRAIN_SPEAKERS:
            into, cap = train, float("inf")
        elif clip.source == "fotaq":
            into, cap = ((dev, DEV_CHARACTER_CAP_S) if clip.speaker in DEV_CHARACTERS
                         else (train, TRAIN_SPEAKER_CAP_S))
        else:
            into, cap = dev, DEV_SPEAKER_CAP_S
        if used[clip.speaker] + clip.seconds <= cap:
            used[clip.speaker] += clip.seconds
            into.append(clip)
    return dev, train


def _align_one(args: tuple[Path, Clip]) -> tuple[str, list | str]:
    cache, clip = args
    try:
        return clip.name, cached_phones(cache, clip.name, clip.audio, clip.text)
    except AlignmentError as error:
        return clip.name, str(error)


def align_all(clips: list[Clip], cache: Path = CACHE / "align",
              workers: int | None = None) -> tuple[list[Aligned], dict[str, str]]:
    """The clips that align, with references; {name: reason} for those that do not."""
    import multiprocessing as mp

    jobs = [(cache, c) for c in clips]
    with mp.get_context("spawn").Pool(workers or os.cpu_count() or 1) as pool:
        results = dict(pool.imap(_align_one, jobs, chunksize=4))
    out, skipped = [], {}
    for clip in clips:
        result = results[clip.name]
        if isinstance(result, str):
            skipped[clip.name] = result
        else:
            out.append(Aligned(clip, reference(result, len(clip.audio) // HOP)))
    return out, skipped


def summary(aligned: list[Aligned], skipped: dict[str, str], failed: dict) -> dict:
    speakers: dict[str, dict] = {}
    for a in aligned:
        s = speakers.setdefault(a.clip.speaker, {"clips": 0, "seconds": 0.0, "sex": a.clip.sex,
                                                 "conditions": set(), "licence": a.clip.licence})
        s["clips"] += 1
        s["seconds"] += a.clip.seconds
        s["conditions"].add(a.clip.condition)
    for s in speakers.values():
        s["seconds"] = round(s["seconds"], 1)
        s["conditions"] = sorted(s["conditions"])
    return {"clips": len(aligned), "seconds": round(sum(a.clip.seconds for a in aligned), 1),
            "speakers": len(speakers), "by_speaker": speakers,
            "conditions": sorted({a.clip.condition for a in aligned}),
            "skipped": skipped, "sources_failed": failed}


def load(which: str = "dev", cache: Path = CACHE, workers: int | None = None,
         ) -> tuple[list[Aligned], dict]:
    """The aligned clips of one split ("dev" or "train") and its summary."""
    clips, failed = gather(cache)
    dev, train = split(clips)
    aligned, skipped = align_all(dev if which == "dev" else train, cache / "align", workers)
    return aligned, summary(aligned, skipped, failed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("dev", "train"), default="dev")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    _, info = load(args.split, workers=args.workers)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
