"""How a piper voice reads text: its config, sentences as the phonemes it knows (in
its own language: espeak reads with the config's espeak voice),
phonemes as model ids laid out as piper lays them out, and where a run of them may be
cut. The streaming voice (pipeline.voice.streaming_tts) is built on these."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from piper import PiperVoice, espeakbridge
from piper.config import PiperConfig
from piper.const import EOS, PAD

from pipeline.core.visemes import STRESS_MARKS
from pipeline.text.input import TextInputError, split_sentences
from pipeline.voice.voice_files import BUNDLED_VOICE, read_config


def load_voice_config(path: str | Path | None = None) -> PiperConfig:
    """A voice's config (None: the bundled voice's), read once per version of the file:
    every voice stream (the API makes one per request) reads the same, and parsing it
    cost a request ~0.3 ms. VoiceError for a config that cannot be used."""
    return read_config(BUNDLED_VOICE.config if path is None else path)


# espeak-ng's clause terminators (its translate.h), as piper's bridge names them.
_INTONATION_COMMA, _INTONATION_QUESTION, _INTONATION_EXCLAMATION = 0x1000, 0x2000, 0x3000
_CLAUSE_TYPE_CLAUSE, _CLAUSE_TYPE_SENTENCE = 0x40000, 0x80000
_TERMINATORS = {
    40 | _CLAUSE_TYPE_SENTENCE: ".",
    40 | _INTONATION_QUESTION | _CLAUSE_TYPE_SENTENCE: "?",
    45 | _INTONATION_EXCLAMATION | _CLAUSE_TYPE_SENTENCE: "!",
    20 | _INTONATION_COMMA | _CLAUSE_TYPE_CLAUSE: ",",
    30 | _CLAUSE_TYPE_CLAUSE: ":",
    30 | _INTONATION_COMMA | _CLAUSE_TYPE_CLAUSE: ";",
}
_CHARS_AUTO, _PHONEMES_IPA = 0, 0x02


def _clauses_without_the_gil(library: str) -> Callable[[str], list[tuple[str, str, bool]]]:
    """piper's espeakbridge.get_phonemes, with espeak-ng's work done outside the GIL.

    piper-tts 1.8.0's bridge (src/piper/espeakbridge.c, py_get_phonemes) reads a text's
    clauses with espeak_TextToPhonemesWithTerminator while holding the GIL: 0.33 ms for
    a 20-word sentence on the 2-vCPU VM, 0.77 ms for 60 words, during which no other
    thread of the process ran Python (50 voices started together wait for each other's
    phonemes, and the device lane for all of them). It also leaked a reference to each
    clause's tuple (2 Python blocks a clause). This calls the same function of the same
    loaded library (dlopen of a loaded path gives its handle, so espeak-ng's state is
    the one piper initialized and set the voice of) through ctypes, which lets the GIL
    go for each call, and names the terminators as the bridge does: (phonemes,
    terminator, ends a sentence) per clause. Callers hold _ESPEAK, as phonemize does."""
    read = ctypes.CDLL(library).espeak_TextToPhonemesWithTerminator
    read.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int,
                     ctypes.POINTER(ctypes.c_int)]
    read.restype = ctypes.c_char_p

    def get(text: str) -> list[tuple[str, str, bool]]:
        if "\0" in text:
            raise ValueError("embedded null character")  # as the bridge's "s" argument
        data = ctypes.create_string_buffer(text.encode("utf-8"))
        cursor = ctypes.c_void_p(ctypes.addressof(data))
        terminator = ctypes.c_int()
        clauses = []
        while cursor.value is not None:
            phonemes = read(ctypes.byref(cursor), _CHARS_AUTO, _PHONEMES_IPA,
                            ctypes.byref(terminator))
            kind = terminator.value & 0x000FFFFF
            clauses.append(((phonemes or b"").decode("utf-8"), _TERMINATORS.get(kind, ""),
                            kind & _CLAUSE_TYPE_SENTENCE == _CLAUSE_TYPE_SENTENCE))
        return clauses

    return get


def _once_per_voice(set_voice: Callable[[str], None]) -> Callable[[str], None]:
    """piper's espeakbridge.set_voice, skipped when that voice is already set.

    piper's phonemizer sets the voice before every text, and espeak-ng's SetVoiceByName
    leaks about 1.3 KB of native memory a call even for the voice already set (3.89 MB
    per 3,000 calls, every time; get_phonemes alone: none). Phonemes read after one
    set_voice equal those read after one per text (1,560 texts, soak prose and
    abbreviations, numbers, accents: all equal). A voice that fails to set is not
    remembered. Callers hold _ESPEAK. Invariant: every voice change in the process goes
    through piper's bridge; the training synth that calls espeak-ng's library directly
    (packaging/lipsync_data.Espeak) runs in processes of its own, as it must anyway."""
    current: str | None = None

    def set_once(voice: str) -> None:
        nonlocal current
        if voice != current:
            set_voice(voice)
            current = voice

    return set_once


# piper's phonemizer looks both up on the module at every call; mended once per process.
if not getattr(espeakbridge, "mended", False):
    espeakbridge.get_phonemes = _clauses_without_the_gil(espeakbridge.__file__)
    espeakbridge.set_voice = _once_per_voice(espeakbridge.set_voice)
    espeakbridge.mended = True

# espeak-ng keeps its state in globals: one phonemization at a time in the process, for
# every voice stream (50 streams at once in bench/gpu.py).
_ESPEAK = threading.Lock()


def phonemize(voice: PiperVoice, text: str) -> list[list[str]]:
    """The voice's phonemes of `text`, a list per sentence espeak reads; thread-safe."""
    with _ESPEAK:
        return voice.phonemize(text)


def spoken_sentences(voice: PiperVoice, text: str) -> Iterator[tuple[str, list[str]]]:
    """(piece of text, its phonemes the voice has ids for) per sentence, lazily.

    A piece espeak reads as several sentences ('end."Next') yields once per sentence,
    the piece's text with the first and "" with the rest, so the text is announced once
    and its words run on; sentences with no phoneme the voice knows are left out.
    """
    id_map = voice.config.phoneme_id_map
    for piece in split_sentences(text):
        said = ""
        for sentence in phonemize(voice, piece):
            phonemes = [p for p in sentence if p in id_map]
            if phonemes:
                yield ("" if said else piece), phonemes
                said = piece


def nothing_to_speak(text: str, voice: str) -> TextInputError:
    # Letters espeak has no pronunciation for (rare Latin extensions, another script than
    # the voice's language has) pass the text checks but produce no phonemes: say so
    # rather than stay silent.
    shown = text if len(text) <= 40 else text[:40] + "…"
    return TextInputError(f"Nothing to speak: the voice {voice} has no pronunciation for "
                          f"{shown!r}.")


def symbol_ids(
    symbols: Sequence[str], id_map: Mapping[str, Sequence[int]]
) -> tuple[list[int], list[int]]:
    """Model ids for a run of symbols laid out as piper lays out a sentence
    (BOS PAD (phoneme PAD)* EOS), and how many of them each symbol owns.

    Each symbol owns its ids and the pad after it (EOS has none): the attribution of
    piper's own PhonemeAlignment. A run may start after BOS or end before EOS.
    """
    pad = id_map[PAD]
    ids: list[int] = []
    widths: list[int] = []
    for symbol in symbols:
        own = [*id_map[symbol], *pad] if symbol != EOS else list(id_map[symbol])
        ids.extend(own)
        widths.append(len(own))
    return ids, widths


def word_gap_cut(phonemes: Sequence[str], lowest: int, limit: int) -> int:
    """Where to end a part of `phonemes` that may hold at most `limit` of them: after
    the last word gap at or beyond `lowest`, else at `limit`; never right after a
    stress mark, which would strand it away from its vowel."""
    gap = max((i for i in range(lowest, limit) if phonemes[i] == " "), default=-1)
    cut = gap + 1 if gap >= 0 else limit
    while cut > 1 and phonemes[cut - 1] in STRESS_MARKS:
        cut -= 1
    return cut
