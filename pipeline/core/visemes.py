"""The 15 OVR visemes, how espeak IPA phonemes map onto them, and Rhubarb's shapes.

The ARPAbet column of the design brief is the reference; IPA symbols are the ones
espeak-ng (inside piper) emits for English.
"""

from __future__ import annotations

OVR_VISEMES: tuple[str, ...] = (
    "sil", "PP", "FF", "TH", "DD", "kk", "CH", "SS", "nn", "RR", "aa", "E", "ih", "oh", "ou",
)
VISEME_INDEX: dict[str, int] = {v: i for i, v in enumerate(OVR_VISEMES)}

# Visemes whose lip contact must always reach the screen, however short the sound:
# a missed closure or lip-teeth contact is the error viewers notice first.
MUST_SHOW: frozenset[str] = frozenset({"PP", "FF"})
MUST_SHOW_INDICES: frozenset[int] = frozenset(VISEME_INDEX[v] for v in MUST_SHOW)

# How far the jaw/lips are open for each viseme, 0 = closed, 1 = widest. Used for the
# openness channel of a mouth frame (photo rigs, level checks) and by tests.
OPENNESS: dict[str, float] = {
    "sil": 0.0, "PP": 0.0, "FF": 0.15, "TH": 0.25, "DD": 0.3, "kk": 0.35, "CH": 0.3,
    "SS": 0.2, "nn": 0.3, "RR": 0.4, "aa": 1.0, "E": 0.7, "ih": 0.45, "oh": 0.75, "ou": 0.4,
}

# OVR → Rhubarb Lip Sync's basic (A–F) and extended (G, H, X) mouth shapes.
RHUBARB_SHAPE: dict[str, str] = {
    "sil": "X", "PP": "A", "FF": "G", "TH": "B", "DD": "B", "kk": "B", "CH": "B",
    "SS": "B", "nn": "H", "RR": "E", "aa": "D", "E": "C", "ih": "B", "oh": "E", "ou": "F",
}

# espeak-ng IPA (single symbols and the vowel clusters piper splits) → OVR viseme.
# Diphthongs are listed whole: they are folded before lookup (see viseme_track).
IPA_TO_VISEME: dict[str, str] = {
    # bilabials
    "p": "PP", "b": "PP", "m": "PP",
    # labiodentals
    "f": "FF", "v": "FF",
    # dentals
    "θ": "TH", "ð": "TH",
    # alveolar stops and flaps
    "t": "DD", "d": "DD", "ɾ": "DD", "ʔ": "DD",
    # velars, glottal fricative
    "k": "kk", "ɡ": "kk", "g": "kk", "ŋ": "kk", "h": "kk", "x": "kk",
    # postalveolars and affricates
    "ʃ": "CH", "ʒ": "CH", "tʃ": "CH", "dʒ": "CH",
    # sibilants
    "s": "SS", "z": "SS",
    # nasal and lateral
    "n": "nn", "l": "nn", "ɫ": "nn", "n̩": "nn", "l̩": "nn",
    # rhotics
    "ɹ": "RR", "r": "RR", "ɚ": "RR", "ɝ": "RR", "ɜ": "RR", "ɜː": "RR", "ɾ̃": "DD",
    # open vowels and their diphthongs
    "ɑ": "aa", "ɑː": "aa", "æ": "aa", "ʌ": "aa", "ɐ": "aa", "a": "aa", "ə": "aa",
    "aɪ": "aa", "aʊ": "aa", "ɒ": "aa",
    # mid front
    "ɛ": "E", "e": "E", "eɪ": "E", "ɛə": "E",
    # close front and the glide j
    "ɪ": "ih", "i": "ih", "iː": "ih", "j": "ih", "ᵻ": "ih", "ɪə": "ih", "ɨ": "ih",
    # rounded mid/back
    "ɔ": "oh", "ɔː": "oh", "o": "oh", "oʊ": "oh", "ɔɪ": "oh", "əʊ": "oh",
    # rounded close and the glide w
    "u": "ou", "uː": "ou", "ʊ": "ou", "w": "ou", "ʊə": "ou", "ʍ": "ou",
    # Sounds of other espeak languages (checked on de, fr, es, it, pt, nl, pl, sv: they fell
    # to "ih" before). German espeak writes ç decomposed (c + U+0327), hence both keys.
    "ç": "CH", "c\u0327": "CH", "ɧ": "CH", "ɕ": "CH", "ʑ": "CH", "ʁ": "RR", "χ": "kk",
    "ɣ": "kk", "c": "kk", "ɟ": "kk", "ɲ": "nn", "ʎ": "nn", "β": "FF",
    # front rounded vowels are shaped by their rounding; ɯ is an unrounded close vowel
    "y": "ou", "ʏ": "ou", "ʉ": "ou", "ø": "oh", "œ": "oh", "ɵ": "oh", "ɤ": "oh", "ɯ": "ih",
}

# Diphthongs and affricates piper emits as separate symbols, matched longest first.
CLUSTERS: tuple[str, ...] = ("aɪ", "aʊ", "eɪ", "oʊ", "ɔɪ", "əʊ", "ɪə", "ɛə", "ʊə", "tʃ", "dʒ")

# Marks that carry duration in piper's alignment but no articulation of their own.
STRESS_MARKS: frozenset[str] = frozenset({"ˈ", "ˌ"})
LENGTH_MARKS: frozenset[str] = frozenset({"ː", "ˑ"})
# Symbols that mean the mouth rests (sentence/phrase pauses, word gaps, BOS/EOS).
PAUSES: frozenset[str] = frozenset({"^", "$", "_", " ", ".", ",", "!", "?", ";", ":", "-", "—", "…", '"', "(", ")"})


def viseme_for_phoneme(symbol: str) -> str:
    """OVR viseme for one (already folded) espeak IPA phoneme; unknown sounds rest."""
    if symbol in PAUSES:
        return "sil"
    if symbol in IPA_TO_VISEME:
        return IPA_TO_VISEME[symbol]
    base = symbol.rstrip("ːˑ̩̪̯̃ʰʲ˞")
    return IPA_TO_VISEME.get(base, "sil" if not base else IPA_TO_VISEME.get(base[0], "ih"))
