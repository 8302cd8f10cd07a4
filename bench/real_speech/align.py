"""Phone-aligned references: pocketsphinx's forced alignment of a clip's transcript,
its ARPAbet phones mapped to the 15 OVR visemes on 10 ms frames.

The table is the design brief's. pocketsphinx (5.1.1, en-us) runs two passes, as in the
models recipe: the first aligns words, the second phones within them. Results are cached
per clip, keyed by the clip's name and a digest of its audio and text, so a changed clip
is aligned anew and an unchanged one never twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np

from pipeline.core.visemes import VISEME_INDEX

FRAME_S = 0.01
HOP = 160  # samples of 16 kHz audio per 10 ms frame

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

Phones = list[tuple[str, int, int]]


class AlignmentError(ValueError):
    """The transcript could not be aligned (words missing from the dictionary, or no path)."""


def align_words(text: str) -> str:
    """The transcript as pocketsphinx's dictionary spells it: lower case, apostrophes
    kept inside words, every other mark a space."""
    return " ".join(re.sub(r"[^a-z']+", " ", text.lower().replace("’", "'")).split()).strip("'")


def sphinx_phones(audio: np.ndarray, text: str) -> Phones:
    """pocketsphinx's two-pass forced alignment: (phone, first frame, frames) each."""
    from pocketsphinx import Decoder

    words = align_words(text)
    if not words:
        raise AlignmentError("no words to align")
    buf = (np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes()
    d = Decoder(lm=None, bestpath=False, loglevel="FATAL")
    missing = [w for w in words.split() if d.lookup_word(w) is None]
    if missing:
        raise AlignmentError(f"not in the dictionary: {' '.join(missing[:5])}")
    try:
        d.set_align_text(words)
        d.start_utt(); d.process_raw(buf, full_utt=True); d.end_utt()  # noqa: E702
        d.set_alignment()
        d.start_utt(); d.process_raw(buf, full_utt=True); d.end_utt()  # noqa: E702
        alignment = d.get_alignment()
    except RuntimeError as error:
        raise AlignmentError(str(error)) from None
    if alignment is None:
        raise AlignmentError("no alignment path")
    return [(p.name, p.start, p.duration) for p in alignment.phones()]


def reference(phones: Phones, n: int) -> np.ndarray:
    """The viseme index of each of `n` 10 ms frames from pocketsphinx phones."""
    ref = np.full(n, VISEME_INDEX["sil"], np.int64)
    for phone, start, duration in phones:
        viseme = ARPABET_TO_VISEME.get(phone.upper().rstrip("012"), "sil")
        ref[start:start + duration] = VISEME_INDEX[viseme]
    return ref


def cached_phones(cache: Path, name: str, audio: np.ndarray, text: str) -> Phones:
    """sphinx_phones, cached under `cache`; raises AlignmentError (also cached)."""
    digest = hashlib.sha1(audio.tobytes() + text.encode()).hexdigest()[:16]
    path = cache / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + f".{digest}.json")
    if path.exists():
        stored = json.loads(path.read_text())
        if "error" in stored:
            raise AlignmentError(stored["error"])
        return [tuple(p) for p in stored["phones"]]
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        phones = sphinx_phones(audio, text)
    except AlignmentError as error:
        path.write_text(json.dumps({"error": str(error)}))
        raise
    path.write_text(json.dumps({"phones": phones}))
    return phones
