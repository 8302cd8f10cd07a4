"""The real recordings in pocketsphinx 5.1.1's source distribution: the project's first
dev set (LibriVox "Sense and Sensibility" clips, the `cards` clips, goforward.raw)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from bench.real_speech.clip import Clip, read_audio
from pipeline.lipsync.features import as_mono_float

SDIST = "pocketsphinx==5.1.1"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "real_speech" / "pocketsphinx"
LICENCE = ("pocketsphinx 5.1.1 sdist test/data (BSD-2-Clause package); the librivox clips "
           "are LibriVox recordings, public domain")


def _data(cache: Path) -> Path:
    data = cache / "pocketsphinx-5.1.1" / "test" / "data"
    if not data.exists():
        cache.mkdir(parents=True, exist_ok=True)
        # The sdist alone: its build tools (pip prepares its metadata) come as wheels,
        # where ":all:" had pip compile Cython from source first (minutes on 2 cores).
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", SDIST.split("==")[0], SDIST, "-d", str(cache)], check=True)
        subprocess.run(["tar", "xzf", str(cache / "pocketsphinx-5.1.1.tar.gz"), "-C", str(cache),
                        "pocketsphinx-5.1.1/test/data/librivox",
                        "pocketsphinx-5.1.1/test/data/cards",
                        "pocketsphinx-5.1.1/test/data/goforward.raw"], check=True)
    return data


def clips(cache: Path) -> list[Clip]:
    data = _data(cache)
    out = []
    for wav in sorted((data / "librivox").glob("*.wav")):
        out.append(Clip(f"librivox/{wav.stem[-4:]}", "pocketsphinx", "pocketsphinx/librivox", "?",
                        "clean", read_audio(wav), wav.with_suffix(".txt").read_text().strip(),
                        LICENCE))
    for line in (data / "cards" / "cards.transcription").read_text().splitlines():
        words, ident = line.rsplit("(", 1)
        ident = ident.strip(") ")
        text = words.replace("<s>", "").replace("</s>", "").strip()
        out.append(Clip(f"cards/{ident}", "pocketsphinx", "pocketsphinx/cards", "m", "clean",
                        read_audio(data / "cards" / f"{ident}.wav"), text, LICENCE))
    raw = np.frombuffer((data / "goforward.raw").read_bytes(), np.int16)
    out.append(Clip("goforward", "pocketsphinx", "pocketsphinx/goforward", "m", "clean",
                    as_mono_float(raw), "go forward ten meters", LICENCE))
    return out
