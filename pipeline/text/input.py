"""Typed text → text a voice can speak in its language, plus what was left out and why.

Also cuts long text into sentence-sized pieces lazily, so a worker can start speaking
the first sentence of a long paste before it has looked at the rest.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from pipeline.text.normalizer import normalize_spans

# Beyond this a paste is almost certainly a mistake (a log file, a book); refusing it up
# front beats minutes of speech the user cannot easily stop.
MAX_TEXT_CHARS = 100_000

# Pieces are phonemized and synthesized one at a time: short enough that the first
# audio comes quickly and no model call is huge, long enough to keep a clause's melody.
MAX_PIECE_CHARS = 250

# The bundled voice's espeak language.
DEFAULT_LANGUAGE = "en-us"

# Languages by espeak's code (its prefix before "-"), as a user names them.
_LANGUAGE_NAMES = {
    "en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian",
    "pt": "Portuguese", "nl": "Dutch", "pl": "Polish", "sv": "Swedish", "da": "Danish",
    "nb": "Norwegian", "no": "Norwegian", "fi": "Finnish", "cs": "Czech", "sk": "Slovak",
    "hu": "Hungarian", "ro": "Romanian", "tr": "Turkish", "ca": "Catalan", "is": "Icelandic",
    "ru": "Russian", "uk": "Ukrainian", "bg": "Bulgarian", "sr": "Serbian", "el": "Greek",
    "ar": "Arabic", "fa": "Persian", "he": "Hebrew", "hi": "Hindi", "ne": "Nepali",
    "mr": "Marathi", "th": "Thai", "ka": "Georgian", "hy": "Armenian", "cmn": "Chinese",
    "yue": "Cantonese", "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "vi": "Vietnamese",
    "sw": "Swahili", "cy": "Welsh", "lb": "Luxembourgish", "kk": "Kazakh",
}

# The scripts (as _script_of names them) a voice of each language reads: the rest are
# skipped and said. Latin is read by every espeak voice.
_SCRIPTS_OF_LANGUAGE = {
    "cmn": {"Chinese"}, "yue": {"Chinese"}, "zh": {"Chinese"}, "ja": {"Japanese", "Chinese"},
    "ko": {"Korean"}, "ru": {"Cyrillic"}, "uk": {"Cyrillic"}, "bg": {"Cyrillic"},
    "sr": {"Cyrillic"}, "kk": {"Cyrillic"}, "el": {"Greek"}, "ar": {"Arabic"}, "fa": {"Arabic"},
    "he": {"Hebrew"}, "hi": {"Devanagari"}, "mr": {"Devanagari"}, "ne": {"Devanagari"},
    "th": {"Thai"}, "ka": {"Georgian"}, "hy": {"Armenian"},
}


def language_name(language: str) -> str:
    """A user's name for an espeak language code ("en-us" → "English")."""
    return _LANGUAGE_NAMES.get(language.lower().split("-")[0], f"the language {language!r}")


class TextInputError(ValueError):
    """Input that cannot be spoken at all; the message is meant for the user."""


@dataclass(frozen=True, slots=True)
class PreparedText:
    """`text` to speak; `spans` the (typed, spoken) pairs tiling it, so captions can show
    what was typed ("$5") timed by what is said ("5 dollars")."""

    text: str
    notices: list[str] = field(default_factory=list)
    spans: list[tuple[str, str]] = field(default_factory=list)


# Scripts are told apart by the first word of the Unicode character name: cheap, and
# precise enough to say "Korean" rather than "non-Latin".
_SCRIPT_OF_NAME_PREFIX: dict[str, str] = {
    "CJK": "Chinese", "HIRAGANA": "Japanese", "KATAKANA": "Japanese",
    "HANGUL": "Korean", "CYRILLIC": "Cyrillic", "GREEK": "Greek", "ARABIC": "Arabic",
    "HEBREW": "Hebrew", "DEVANAGARI": "Devanagari", "BENGALI": "Bengali", "TAMIL": "Tamil",
    "TELUGU": "Telugu", "THAI": "Thai", "LAO": "Lao", "KHMER": "Khmer", "GEORGIAN": "Georgian",
    "ARMENIAN": "Armenian", "ETHIOPIC": "Ethiopic", "BOPOMOFO": "Chinese", "YI": "Yi",
    "MYANMAR": "Myanmar", "TIBETAN": "Tibetan", "SINHALA": "Sinhala", "GUJARATI": "Gujarati",
    "GURMUKHI": "Gurmukhi", "KANNADA": "Kannada", "MALAYALAM": "Malayalam", "ORIYA": "Oriya",
    "MONGOLIAN": "Mongolian", "SYRIAC": "Syriac", "THAANA": "Thaana",
}

# Ideographic punctuation the voice should still hear as a pause, so mixed
# Chinese/English keeps its phrasing. CJK text puts no space after it; English needs one.
_PUNCTUATION_MAP = str.maketrans({
    "。": ". ", "、": ", ", "，": ", ", "！": "! ", "？": "? ", "：": ": ", "；": "; ",
    "「": '"', "」": '"', "『": '"', "』": '"', "【": "(", "】": ")",
    "《": '"', "》": '"', "〈": '"', "〉": '"', "・": " ", "〜": "-",
})

# Terminal escape sequences (ECMA-48), as in pasted coloured terminal output: CSI
# (colours, cursor moves; ESC [ or 8-bit CSI), the string sequences OSC, DCS, SOS, PM and
# APC (titles, hyperlinks) up to BEL or ST (an unterminated one ends at the next ESC or
# the end of the text), and ESC with one final character (after any intermediates). They
# style text rather than separate it, so they go whole and leave no gap.
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"
    r"|(?:\x1b[]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]"
)

# Control characters that are ordinary whitespace: word gaps, nothing to report.
_WHITESPACE_CONTROLS = frozenset("\t\n\v\f\r")

# Pieces that join or modify an emoji without being one themselves: ZWJ, variation
# selectors, skin tones, keycap, tag characters.
_EMOJI_JOINERS = frozenset({0x200D, 0xFE0E, 0xFE0F, 0x20E3})


def _is_emoji_joiner(cp: int) -> bool:
    return cp in _EMOJI_JOINERS or 0x1F3FB <= cp <= 0x1F3FF or 0xE0020 <= cp <= 0xE007F


def _is_emoji(cp: int) -> bool:
    return (
        0x1F000 <= cp <= 0x1FAFF
        or 0x2600 <= cp <= 0x27BF
        or 0x2B00 <= cp <= 0x2BFF
        or 0x2300 <= cp <= 0x23FF
    )


def _script_of(ch: str) -> str | None:
    """The name of a letter's script when the English voice can't speak it, else None."""
    name = unicodedata.name(ch, "")
    script = _SCRIPT_OF_NAME_PREFIX.get(re.split(r"[ -]", name, maxsplit=1)[0])
    if script is not None:
        return script
    if unicodedata.category(ch) in ("Lu", "Ll", "Lt", "Lo") and not name.startswith("LATIN"):
        return "non-Latin"
    return None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def prepare_text(raw: str, language: str = DEFAULT_LANGUAGE) -> PreparedText:
    """Clean `raw` for a voice of the espeak `language`, or raise TextInputError if
    nothing is speakable. Numbers, units and codes are written out for English voices;
    espeak reads them in the voice's own language otherwise."""
    code = language.lower().split("-")[0]
    readable = _SCRIPTS_OF_LANGUAGE.get(code, set())
    speaks = language_name(language)
    if len(raw) > MAX_TEXT_CHARS:
        raise TextInputError(
            f"The text is {len(raw):,} characters long; the limit is {MAX_TEXT_CHARS:,}. "
            "Split it into smaller parts."
        )
    if not raw.strip():
        raise TextInputError("Nothing to speak: the text is empty.")

    text, escapes = _ESCAPE_SEQUENCE.subn("", raw)
    text = unicodedata.normalize("NFKC", text.translate(_PUNCTUATION_MAP))
    out: list[str] = []
    skipped: Counter[str] = Counter()
    emoji = controls = 0
    after_joiner = False
    previous_regional = False
    for ch in text:
        cp = ord(ch)
        if 0x20 <= cp < 0x7F:
            # Printable ASCII, nearly all of typed English, needs none of the checks
            # below; the loop must not cost first audio ~0.1 ms per word of long text.
            previous_regional = after_joiner = False
            out.append(ch)
            continue
        if _is_emoji_joiner(cp):
            after_joiner = cp == 0x200D
            out.append(" ")
            continue
        if 0x1F1E6 <= cp <= 0x1F1FF:
            # Flags are pairs of regional indicators: count the pair once.
            emoji += 0 if previous_regional else 1
            previous_regional = not previous_regional
            out.append(" ")
            continue
        previous_regional = False
        if _is_emoji(cp):
            emoji += 0 if after_joiner else 1
            after_joiner = False
            out.append(" ")
            continue
        after_joiner = False
        category = unicodedata.category(ch)
        if category == "Cf":
            # Invisible format characters (soft hyphen, bidi marks) sit inside words.
            continue
        if category[0] in "CZ":
            # Newlines, tabs, separators and controls become word gaps, not noise.
            if category == "Cc" and ch not in _WHITESPACE_CONTROLS:
                controls += 1
            out.append(" ")
            continue
        script = _script_of(ch)
        if script is not None and script not in readable:
            skipped[script] += 1
            out.append(" ")
            continue
        out.append(ch)

    # "[[ ... ]]" is piper's raw-phoneme syntax: typed text must not be able to inject it.
    cleaned = re.sub(r"\[(?=\[)|\](?=\])", lambda m: m.group(0) + " ", "".join(out))
    # Skipped characters leave spaces behind; none may separate a word from its comma.
    cleaned = re.sub(r" +(?=[.,!?;:])", "", re.sub(r" {2,}", " ", cleaned)).strip()

    if "Japanese" in skipped and "Chinese" in skipped and code not in ("cmn", "yue", "zh"):
        # Kanji next to kana are Japanese, not Chinese.
        skipped["Japanese"] += skipped.pop("Chinese")

    # What was left out that is no language: (how many, one, more than one).
    left_out = [kind for kind in (
        (emoji, "emoji", "emoji"),
        (escapes, "terminal escape sequence", "terminal escape sequences"),
        (controls, "control character", "control characters"),
    ) if kind[0]]
    notices = [f"Skipped {n} {one if n == 1 else many}" for n, one, many in left_out]
    for script, count in skipped.most_common():
        notices.append(
            f"Skipped {_plural(count, script + ' character')}: "
            f"the voice speaks {speaks}"
        )

    if not any(ch.isalnum() for ch in cleaned):
        if skipped:
            raise TextInputError(
                f"Nothing to speak: the voice speaks {speaks}, and the text "
                f"has only {', '.join(skipped)} characters."
            )
        if left_out:
            kinds = " and ".join(many for _, _, many in left_out)
            raise TextInputError(f"Nothing to speak: the text has only {kinds}.")
        raise TextInputError("Nothing to speak: the text has no letters or digits.")
    # Last, so numbers, units and codes are read as a person would say them on every path.
    spans = normalize_spans(cleaned) if code == "en" else [(cleaned, cleaned)]
    return PreparedText("".join(spoken for _, spoken in spans), notices, spans)


# A sentence ends at . ! ? or … (with any closing quotes/brackets) followed by a space.
SENTENCE_END = re.compile(r"[.!?…]+[\"')\]]*\s+")
_CLAUSE_END = re.compile(r"[,;:]\s+")


def split_sentences(text: str, max_chars: int = MAX_PIECE_CHARS) -> Iterator[str]:
    """Yield `text` as sentences of at most `max_chars`, lazily, in order.

    A longer sentence is cut after its last clause mark (, ; :) that fits, else at its
    last space, else (one enormous word) hard at `max_chars`.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    start = 0
    for match in SENTENCE_END.finditer(text):
        yield from _fit(text[start:match.end()].strip(), max_chars)
        start = match.end()
    yield from _fit(text[start:].strip(), max_chars)


def _fit(sentence: str, max_chars: int) -> Iterator[str]:
    while len(sentence) > max_chars:
        window = sentence[: max_chars + 1]
        clauses = list(_CLAUSE_END.finditer(window))
        if clauses and clauses[-1].start() > 0:
            cut = clauses[-1].start() + 1
        else:
            space = window.rfind(" ")
            cut = space if space > 0 else max_chars
        yield sentence[:cut].strip()
        sentence = sentence[cut:].strip()
    if sentence:
        yield sentence
