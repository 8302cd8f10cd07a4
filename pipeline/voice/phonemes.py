"""How a piper voice reads text: its config, sentences as the phonemes it knows (in
its own language: espeak reads with the config's espeak voice),
phonemes as model ids laid out as piper lays them out, and where a run of them may be
cut. The streaming voice (pipeline.voice.streaming_tts) is built on these."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from piper import PiperVoice
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
