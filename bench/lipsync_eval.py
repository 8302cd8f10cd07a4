"""Lip-shape accuracy on real human speech, ours against two baselines, in one run.

    python bench/lipsync_eval.py --out bench/results/lipsync_eval.json
    python bench/lipsync_eval.py --model CANDIDATE.onnx   # score another model file
    python bench/lipsync_eval.py --candidate NEW.onnx     # the shipped one and NEW, one run

Needs (evaluation only, not the app): pocketsphinx==5.1.1 (phone alignment) and
pylipsync (the MFCC-template baseline). Data: the real recordings in pocketsphinx's
5.1.1 source distribution (LibriVox clips, the `cards` clips, goforward.raw), fetched
with `pip download` into .cache/ on first use. None of it is a training voice.

Reference: pocketsphinx forced alignment of each clip's transcript (two passes, as in
the models recipe), ARPAbet phones mapped to the 15 OVR visemes with the design
brief's table, on pocketsphinx's 10 ms frames. Predictions are compared at each
reference frame's centre.

Coarse groups (what a viewer tells apart at a glance; pipeline.lipsync.model.COARSE):
    sil: sil | PP: PP | FF: FF | aa: aa | round: oh ou |
    narrow/spread: TH DD kk CH SS nn RR E ih (teeth close, lips unrounded)
Balanced accuracy = mean over the 6 groups of the recall of that group.
Onsets: each change of coarse group in the reference is matched to the nearest change
into the same group in the prediction within ±100 ms (for "smoothed" rows the poses
the user sees, for "raw" rows the model's argmax). Chatter: changes of the shown viseme
per second (the reference itself changes ~9 times a second on this speech).

The smoother's settings are not chosen here (packaging/tune_smoother.py picks them on
synthetic held-out speech); this set only reports them.

Systems: ours (each latency head, raw argmax and smoothed); an RMS volume gate with
hold (PNGtuber style: open "aa" above a threshold, held 150 ms, else "sil"); uLipSync's
MFCC template matching through pylipsync (64 ms windows, its stock A/I/U/E/O profile).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import wave
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import describe, publish  # noqa: E402
from pipeline.audio.resample import resample  # noqa: E402
from pipeline.core.modes import MODE_NAMES  # noqa: E402
from pipeline.core.visemes import VISEME_INDEX  # noqa: E402
from pipeline.lipsync.features import as_mono_float  # noqa: E402
from pipeline.lipsync.model import (  # noqa: E402,E501
    COARSE,
    COARSE_GROUPS,
    DEFAULT_MODEL,
    MODES_MS,
    LipShapeModel,
    VisemeSmoother,
)

CACHE = ROOT / ".cache" / "lipsync_eval"
SDIST = "pocketsphinx==5.1.1"
FRAME_S = 0.01

ARPABET_TO_VISEME = {
    **dict.fromkeys(["P", "B", "M"], "PP"), **dict.fromkeys(["F", "V"], "FF"),
    **dict.fromkeys(["TH", "DH"], "TH"), **dict.fromkeys(["T", "D"], "DD"),
    **dict.fromkeys(["K", "G", "NG", "HH"], "kk"),
    **dict.fromkeys(["CH", "JH", "SH", "ZH"], "CH"), **dict.fromkeys(["S", "Z"], "SS"),
    **dict.fromkeys(["N", "L"], "nn"), **dict.fromkeys(["R", "ER"], "RR"),
    **dict.fromkeys(["AA", "AE", "AH", "AY", "AW"], "aa"), **dict.fromkeys(["EH", "EY"], "E"),
    **dict.fromkeys(["IH", "IY", "Y"], "ih"), **dict.fromkeys(["AO", "OW", "OY"], "oh"),
    **dict.fromkeys(["UW", "UH", "W"], "ou"),
}
PYLIPSYNC_TO_VISEME = {"aa": "aa", "ee": "E", "ih": "ih", "oh": "oh", "ou": "ou", "silence": "sil"}


# ------------------------------------------------------------------ data

def sdist_data() -> Path:
    data = CACHE / "pocketsphinx-5.1.1" / "test" / "data"
    if not data.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                        ":all:", SDIST, "-d", str(CACHE)], check=True)
        subprocess.run(["tar", "xzf", str(CACHE / "pocketsphinx-5.1.1.tar.gz"), "-C", str(CACHE),
                        "pocketsphinx-5.1.1/test/data/librivox", "pocketsphinx-5.1.1/test/data/cards",
                        "pocketsphinx-5.1.1/test/data/goforward.raw"], check=True)
    return data


def clips(data: Path) -> list[tuple[str, np.ndarray, str]]:
    """(name, 16 kHz float32 audio, transcript) for every development clip."""
    out = []
    for wav in sorted((data / "librivox").glob("*.wav")):
        out.append((f"librivox/{wav.stem[-4:]}", read_wav(wav), wav.with_suffix(".txt").read_text().strip()))
    lines = (data / "cards" / "cards.transcription").read_text().splitlines()
    for line in lines:
        words, ident = line.rsplit("(", 1)
        text = words.replace("<s>", "").replace("</s>", "").strip()
        out.append((f"cards/{ident.strip(') ')}", read_wav(data / "cards" / f"{ident.strip(') ')}.wav"), text))
    raw = np.frombuffer((data / "goforward.raw").read_bytes(), np.int16)
    out.append(("goforward", as_mono_float(raw), "go forward ten meters"))
    return out


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as w:
        rate, width, ch = w.getframerate(), w.getsampwidth(), w.getnchannels()
        pcm = np.frombuffer(w.readframes(w.getnframes()), np.int16 if width == 2 else np.uint8)
    audio = as_mono_float(pcm.reshape(-1, ch))
    return audio if rate == 16000 else resample(audio, rate, 16000)


def align(name: str, audio: np.ndarray, text: str) -> np.ndarray:
    """Reference viseme per 10 ms frame from pocketsphinx's phone alignment (cached)."""
    cache = CACHE / "align" / (name.replace("/", "_") + ".json")
    if cache.exists():
        phones = json.loads(cache.read_text())
    else:
        from pocketsphinx import Decoder

        buf = (np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes()
        d = Decoder(lm=None, bestpath=False, loglevel="ERROR")
        d.set_align_text(text)
        d.start_utt(); d.process_raw(buf, full_utt=True); d.end_utt()  # noqa: E702
        d.set_alignment()
        d.start_utt(); d.process_raw(buf, full_utt=True); d.end_utt()  # noqa: E702
        phones = [(p.name, p.start, p.duration) for p in d.get_alignment().phones()]
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(phones))
    n = len(audio) // 160
    ref = np.full(n, VISEME_INDEX["sil"], np.int64)
    for phone, start, duration in phones:
        viseme = ARPABET_TO_VISEME.get(phone.upper().rstrip("012"), "sil")
        ref[start:start + duration] = VISEME_INDEX[viseme]
    return ref


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
    raw, smooth = np.empty(n, np.int64), np.empty(n, np.int64)
    for j in range(n):
        # Reference frame j is pocketsphinx's analysis window [j * 10, j * 10 + 25.6) ms,
        # centred at j * 10 + 12.8 ms; our instants sit on the 10 ms grid, so the two
        # instants around j * 10 + 15 ms stand for it.
        k = min(np.searchsorted(times, (j + 1) * FRAME_S - 1e-6), len(times) - 2)
        raw[j] = int(np.argmax(probs[k] + probs[k + 1]))
        smooth[j] = poses[k]
    return raw, smooth


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
    return {
        # Chatter: how often the shown viseme changes, per second of audio.
        "changes_per_s": float(np.count_nonzero(shown[1:] != shown[:-1]) / (len(shown) * FRAME_S)),
        "viseme15_accuracy": float(np.mean(ref == pred)),
        "coarse_accuracy": float(np.mean(cr == cp)),
        "coarse_balanced_accuracy": float(np.mean(recalls)),
        "coarse_recall": {COARSE_GROUPS[g]: float(np.mean(cp[cr == g] == g))
                          for g in range(len(COARSE_GROUPS)) if np.any(cr == g)},
        "onset_median_ms": float(np.median(errors_ms)) if len(errors_ms) else None,
        "onset_p90_ms": float(np.percentile(errors_ms, 90)) if len(errors_ms) else None,
        "onset_mean_ms": float(np.mean(errors_ms)) if len(errors_ms) else None,
        "onsets_matched_share": matched / total if total else None,
        # Positive: the prediction changes after the reference does.
        "onset_bias_ms": float(np.median(signed) * 1000) if signed else None,
        "reference_onsets": total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--candidate", type=Path, default=None,
                        help="a second model file, scored in the same run (rows candidate_*)")
    args = parser.parse_args()
    t0 = time.time()
    data = sdist_data()
    refs, preds = [], {}
    hop_times: dict[str, list[float]] = {mode: [] for mode in MODE_NAMES}
    for name, audio, text in clips(data):
        ref = align(name, audio, text)
        n = len(ref)
        refs.append(ref)
        # A constant "ih" gives the scale: high plain accuracy, low balanced accuracy.
        systems = {"constant_ih": (np.full(n, VISEME_INDEX["ih"]),) * 2,
                   "rms_gate": (volume_gate(audio, n),) * 2,
                   "mfcc_templates": (mfcc_templates(audio, n),) * 2}
        models = {"ours": args.model, **({"candidate": args.candidate} if args.candidate else {})}
        for label, path in models.items():
            for mode, ms in MODES_MS.items():
                raw, smooth = ours(audio, n, ms, hop_times[mode] if label == "ours" else [], path)
                systems[f"{label}_{mode}_raw"] = (raw, raw)
                systems[f"{label}_{mode}_smoothed"] = (smooth, smooth)
        for key, (pred, shown) in systems.items():
            preds.setdefault(key, ([], []))
            preds[key][0].append(pred)
            preds[key][1].append(shown)
    ref = np.concatenate(refs)
    results = {key: score(ref, np.concatenate(p), np.concatenate(s)) for key, (p, s) in preds.items()}
    summary = {
        "benchmark": "lipsync_eval",
        "machine": describe(),
        "data": f"{SDIST} sdist test/data: librivox (5), cards (5), goforward.raw",
        "reference": "pocketsphinx 5.1.1 forced phone alignment, ARPAbet→viseme per design brief",
        "model": args.model.name,
        "candidate": args.candidate.name if args.candidate else None,
        "frames": int(len(ref)),
        "seconds": round(time.time() - t0, 1),
        "systems": results,
        "per_hop_ms": {mode: {"p50": round(float(np.percentile(t, 50)) * 1000, 3),
                              "p99": round(float(np.percentile(t, 99)) * 1000, 3)}
                       for mode, t in hop_times.items()},
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
