"""How a piper voice reads text: its config, sentences as the phonemes it knows (in
its own language: espeak reads with the config's espeak voice),
phonemes as model ids laid out as piper lays them out, and where a run of them may be
cut. The streaming voice (pipeline.voice.streaming_tts) is built on these."""

from __future__ import annotations

import ctypes
import sys
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


def _without_leaked_clauses(get_phonemes: Callable[[str], list[tuple]]) -> Callable[[str], list[tuple]]:
    """piper's espeakbridge.get_phonemes, less the reference it leaks to each clause.

    piper-tts 1.8.0's C bridge appends `Py_BuildValue(...)` to its list without releasing
    its own reference (src/piper/espeakbridge.c, py_get_phonemes), so every clause's tuple
    and phoneme string outlived the call: 2 Python blocks a clause (4.0 a call on a
    two-clause text, measured). The extra references are counted on the first result
    that has a clause (its refcount beyond the list's and getrefcount's own), so a bridge
    that holds none is left alone, and that many are released from each tuple. Callers
    hold _ESPEAK, as phonemize does, so the count is made once."""
    release = ctypes.pythonapi.Py_DecRef
    release.argtypes, release.restype = [ctypes.py_object], None
    extra: int | None = None

    def get(text: str) -> list[tuple]:
        nonlocal extra
        clauses = get_phonemes(text)
        if extra is None and clauses:
            extra = max(0, sys.getrefcount(clauses[0]) - 2)
        for clause in clauses if extra else ():
            for _ in range(extra):
                release(clause)
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
    espeakbridge.get_phonemes = _without_leaked_clauses(espeakbridge.get_phonemes)
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
