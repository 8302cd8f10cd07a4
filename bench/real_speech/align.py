"""Phone-aligned references: pocketsphinx's forced alignment of a clip's transcript,
its ARPAbet phones mapped to the 15 OVR visemes on 10 ms frames.

The table is the design brief's. pocketsphinx (5.1.1, en-us) runs two passes, as in the
models recipe: the first aligns words, the second phones within them. A word its
dictionary lacks is read by the bundled voice's phonemizer (espeak-ng), mapped to
ARPAbet. Results are cached per clip, keyed by the clip's name and a digest of its audio
and text, so a changed clip is aligned anew and an unchanged one never twice.
"""

from __future__ import annotations

import functools
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

# espeak-ng's IPA (as the bundled voice's phonemizer writes it, one code point a symbol)
# to ARPAbet, for the words pocketsphinx's en-us dictionary lacks (names, "aligner",
# "unmute"): two-symbol sounds first. Marks with no sound of their own map to nothing.
_IPA_TO_ARPABET = {
    "tʃ": "CH", "dʒ": "JH", "aɪ": "AY", "aʊ": "AW", "eɪ": "EY", "oʊ": "OW", "əʊ": "OW",
    "ɔɪ": "OY", "iː": "IY", "uː": "UW", "ɑː": "AA", "ɔː": "AO", "ɜː": "ER",
    "p": "P", "b": "B", "t": "T", "d": "D", "k": "K", "g": "G", "ɡ": "G", "f": "F", "v": "V",
    "θ": "TH", "ð": "DH", "s": "S", "z": "Z", "ʃ": "SH", "ʒ": "ZH", "h": "HH", "m": "M",
    "n": "N", "ŋ": "NG", "l": "L", "ɹ": "R", "r": "R", "ɾ": "D", "j": "Y", "w": "W", "ʍ": "W",
    "i": "IY", "ɪ": "IH", "ᵻ": "IH", "e": "EY", "ɛ": "EH", "æ": "AE", "a": "AA", "ɑ": "AA",
    "ɒ": "AA", "ɔ": "AO", "o": "OW", "ʊ": "UH", "u": "UW", "ʌ": "AH", "ə": "AH", "ɐ": "AH",
    "ɚ": "ER", "ɜ": "ER", "ɝ": "ER", "x": "K",
    **dict.fromkeys(["ˈ", "ˌ", "ː", "ʲ", "ʔ", "\u0329", "-", " "], ""),
}


@functools.cache
def _reader():
    """The bundled voice's phonemizer (no model session): made once, read by every word."""
    from piper import PiperVoice

    from pipeline.voice.phonemes import load_voice_config

    return PiperVoice(session=None, config=load_voice_config())


def espeak_pronunciation(word: str) -> str | None:
    """ARPAbet for `word` from the bundled voice's phonemizer; None if it has a sound the
    table lacks."""
    from pipeline.voice.phonemes import phonemize

    symbols = "".join(s for sentence in phonemize(_reader(), word) for s in sentence)
    phones, i = [], 0
    while i < len(symbols):
        two = symbols[i:i + 2]
        if two in _IPA_TO_ARPABET:
            phones.append(_IPA_TO_ARPABET[two])
            i += 2
        elif symbols[i] in _IPA_TO_ARPABET:
            phones.append(_IPA_TO_ARPABET[symbols[i]])
            i += 1
        else:
            return None
    # espeak writes a doubled consonant at some joins ("azura": ɹɹ); pocketsphinx wants one.
    phones = [p for k, p in enumerate(phones) if p and (k == 0 or p != phones[k - 1])]
    return " ".join(phones) or None


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
    missing = []
    for word in dict.fromkeys(words.split()):
        if d.lookup_word(word) is None:
            pronunciation = espeak_pronunciation(word)
            if pronunciation is None:
                missing.append(word)
            else:
                d.add_word(word, pronunciation, True)
    if missing:
        raise AlignmentError(f"no pronunciation for: {' '.join(missing[:5])}")
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
