"""Transcript-assisted mouth cues for a recording: the transcript's visemes, timed by the
audio.

The words are read by the voice's own phonemizer (espeak inside piper), one word at a
time so every viseme knows its word, and folded into articulations as the voice's own
timings are (pipeline.voice.viseme_track.fold_phonemes). The lip-shape model's
per-frame probabilities (the premium head, as `lipsync` uses offline) are the emissions
of a left-to-right Viterbi over that known sequence: each articulation holds for at
least MIN_FRAMES frames, and an optional rest may sit before, between and after words.
So the shapes come from the words and the timing from the audio.

A word the audio does not support is not shown as its visemes: its frames get the free
model's shapes (the smoothed cues `lipsync` writes without a transcript) and the word is
reported. Support is the aligned path's mean log-probability over the word's frames
against the free model's best per frame (`UNSUPPORTED_LOG_RATIO`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from piper import PiperVoice

from pipeline.audio.audio_file import read_blocks
from pipeline.core.frames import VisemeCue
from pipeline.core.modes import MODES_MS, OFFLINE_MODE
from pipeline.core.visemes import OVR_VISEMES, VISEME_INDEX
from pipeline.lipsync.model import (
    DEFAULT_MODEL,
    FRAME_S,
    LipFrame,
    LipShapeModel,
    VisemeSmoother,
)
from pipeline.text.input import TextInputError, prepare_text
from pipeline.voice.phonemes import load_voice_config, phonemize
from pipeline.voice.viseme_track import fold_phonemes
from pipeline.voice.voice_files import BUNDLED_VOICE, VoiceFiles

_SIL = VISEME_INDEX["sil"]
# Shortest hold of one articulation, in 10 ms frames. On the dev set (bench/lipsync_eval.py,
# 2026-12-04) 1, 2 and 3 frames gave 15-viseme accuracy 0.733 / 0.747 / 0.755 and six-group
# balanced accuracy 0.776 / 0.787 / 0.794; 3 is also the shortest phone its reference can
# have (pocketsphinx's phones are three 10 ms states).
MIN_FRAMES = 3
# Probabilities are floored before the log so one confident wrong frame cannot veto a
# path outright.
_FLOOR = 1e-4
# Mean per-frame log-probability of the aligned path below the free model's best over a
# word's frames, past which the word is reported as not in the audio. On the dev set
# (bench/lipsync_eval.py's transcript_support) 2 of its 96 correct words fall below -2.0
# and 34 of 52 words put in place of a real one with other visemes do; -1.5 would catch
# 77 % but flag 9 % of correct words, -2.5 none of those and 56 %.
UNSUPPORTED_LOG_RATIO = -2.0
# The Viterbi keeps one byte per frame and state for the frames of one block at a time.
# Speech of 3 words a second and 4 visemes a word makes ~39 states a second (3 frames
# each, a rest a word) against 100 frames: 400 MB hold about 5 minutes in one block
# (74 s of the dev set took 1.1 s on the 2-core VM); longer runs its blocks twice. The
# work grows as frames x states, with the square of the length: the dev set 16 times
# over (595 s, 1536 words) took 63 s there, at a load of 10.
BLOCK_BYTES = 400_000_000


class TranscriptError(TextInputError):
    """A transcript that cannot be aligned; the message is meant for the user."""


@dataclass(frozen=True, slots=True)
class UnsupportedWord:
    """A transcript word the audio does not support, where the alignment put it."""

    text: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class TranscriptCues:
    """Contiguous cues from 0 to the last frame's end, within half a frame of the
    recording's (as `infer_file` makes them; cues_document rests the tail), and the
    words the audio did not support, in order; their spans carry the free model's cues."""

    cues: list[VisemeCue]
    unsupported: list[UnsupportedWord]


@dataclass(frozen=True, slots=True)
class TranscriptWord:
    """A written word and its visemes as the voice reads it, no two neighbours equal."""

    text: str
    visemes: tuple[int, ...]


def transcript_cues(path: Path | str, text: str, voice: VoiceFiles = BUNDLED_VOICE,
                    model_path: Path | str = DEFAULT_MODEL) -> TranscriptCues:
    """Cues for the recording at `path` (anything pipeline.audio.audio_file reads) whose
    words are `text`. AudioFileError for a file it cannot read, TranscriptError for a
    transcript with nothing to align."""
    words = transcript_words(text, voice)
    rate, blocks = read_blocks(path)
    audio = np.concatenate(list(blocks) or [np.zeros(0, np.float32)])
    return align_words(audio, rate, words, model_path)


def transcript_words(text: str, voice: VoiceFiles = BUNDLED_VOICE) -> list[TranscriptWord]:
    """The transcript's words with the visemes the voice reads them with, each alone;
    words with no sound of their own (a dash) are left out. TranscriptError when none is
    left or the text is empty."""
    if not text.strip():
        raise TranscriptError("The transcript is empty: give the words spoken in the recording.")
    config = load_voice_config(voice.config)
    try:
        prepared = prepare_text(text, config.espeak_voice)
    except TextInputError as exc:
        raise TranscriptError(f"The transcript has no words to align: {exc}") from None
    reader = PiperVoice(session=None, config=config)
    words = []
    for written in prepared.text.split():
        symbols = [s for sentence in phonemize(reader, written) for s in sentence]
        visemes = [VISEME_INDEX[p.viseme] for p in fold_phonemes([(s, 1) for s in symbols], 1)
                   if p.viseme != "sil"]
        # One state per run of a viseme: the model cannot tell "t" from "d".
        merged = tuple(v for i, v in enumerate(visemes) if i == 0 or visemes[i - 1] != v)
        if merged:
            words.append(TranscriptWord(re.sub(r"^\W+|\W+$", "", written) or written, merged))
    if not words:
        raise TranscriptError(f"The transcript has no words to align: the voice {voice.name} "
                              f"has no pronunciation for {text[:40]!r}.")
    return words


def align_words(audio: np.ndarray, rate: int, words: Sequence[TranscriptWord],
                model_path: Path | str = DEFAULT_MODEL) -> TranscriptCues:
    """`transcript_cues` for decoded mono audio at `rate`."""
    times, probs = lip_frames(audio, rate, model_path)
    return align_frames(times, probs, len(audio) / rate, words)


def lip_frames(audio: np.ndarray, rate: int, model_path: Path | str = DEFAULT_MODEL
               ) -> tuple[np.ndarray, np.ndarray]:
    """(instants [T], probabilities [T, 15]) of the premium head over the recording,
    its last lookahead finished by trailing silence, as infer_file runs it; instants 10 ms
    apart, each frame's span [t - 5 ms, t + 5 ms) within or overlapping the recording."""
    model = LipShapeModel(model_path, MODES_MS[OFFLINE_MODE])
    tail = np.zeros(int(rate * (model.lookahead_ms / 1000 + 2 * FRAME_S)), np.float32)
    duration = len(audio) / rate
    # The first frames' instants precede the recording (by up to the lookahead): only
    # frames whose span reaches into it describe it.
    frames = [f for f in model.push(np.concatenate([audio.astype(np.float32), tail]), rate)
              if -FRAME_S / 2 < f.time_s < duration]
    times = np.array([f.time_s for f in frames], np.float64)
    probs = np.array([f.probs for f in frames], np.float32).reshape(len(frames), len(OVR_VISEMES))
    return times, probs


def align_frames(times: np.ndarray, probs: np.ndarray, duration: float,
                 words: Sequence[TranscriptWord]) -> TranscriptCues:
    """`transcript_cues` for the model's frames of a recording `duration` s long."""
    free = _free_path(times, probs)
    if len(times) < sum(len(w.visemes) for w in words):
        # Too short to hold one frame per sound: none of the words can be supported.
        return TranscriptCues(_cues(times, free, duration),
                              [UnsupportedWord(w.text, 0.0, duration) for w in words])
    path, spans, support = _aligned(probs, words)
    labels = path.copy()
    unsupported = []
    for word, (a, b), ratio in zip(words, spans, support):
        if ratio < UNSUPPORTED_LOG_RATIO:
            labels[a:b] = free[a:b]
            unsupported.append(UnsupportedWord(word.text, *_span_times(times, a, b, duration)))
    return TranscriptCues(_cues(times, labels, duration), unsupported)


def word_support(probs: np.ndarray, words: Sequence[TranscriptWord]) -> list[float]:
    """Each word's support, the measure UNSUPPORTED_LOG_RATIO bounds (bench/lipsync_eval.py
    measures it on correct and substituted words)."""
    return _aligned(probs, words)[2]


def _aligned(probs: np.ndarray, words: Sequence[TranscriptWord]
             ) -> tuple[np.ndarray, list[tuple[int, int]], list[float]]:
    """The Viterbi path, each word's frames, and each word's mean log-probability on the
    path less the free model's best, over its frames (0 where they agree throughout)."""
    log_probs = np.log(np.maximum(probs, _FLOOR))
    path, spans = _viterbi(log_probs, words)
    best = log_probs.max(axis=1)
    support = [float(np.mean(log_probs[np.arange(a, b), path[a:b]] - best[a:b]))
               for a, b in spans]
    return path, spans, support


def _free_path(times: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """The viseme `lipsync` shows without a transcript at each frame (the smoother's)."""
    smoother = VisemeSmoother()
    # Openness plays no part in which viseme the smoother shows.
    return np.array([smoother.update(LipFrame(t, p, 0.0)).dominant
                     for t, p in zip(times, probs)], np.int64)


def _viterbi(log_probs: np.ndarray, words: Sequence[TranscriptWord],
             block_frames: int | None = None) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The best viseme per frame through the words in order, and each word's frames.

    States: an optional rest, then per word its visemes, MIN_FRAMES sub-states each (the
    last loops), then an optional rest, and so on; a rest may be skipped. Frames fewer
    than the words need squeeze the minimum to one frame rather than fail. The moves are
    kept `block_frames` frames at a time (None: as many as BLOCK_BYTES holds); the path
    does not depend on it."""
    frames = len(log_probs)
    needed = sum(len(w.visemes) for w in words)
    hold = max(1, min(MIN_FRAMES, frames // max(1, needed)))
    viseme, word_of, loops, skip_from = [], [], [], []
    rest_start = 0

    def add_rest() -> None:
        nonlocal rest_start
        rest_start = len(viseme)
        viseme.append(_SIL)
        word_of.append(-1)
        loops.append(True)
        skip_from.append(-1)

    add_rest()
    for w, word in enumerate(words):
        for k, v in enumerate(word.visemes):
            for sub in range(hold):
                first_of_word = k == 0 and sub == 0
                # The first state after a rest may also be entered from the state before it.
                skip_from.append(rest_start - 1 if first_of_word else -1)
                viseme.append(v)
                word_of.append(w)
                loops.append(sub == hold - 1)
        add_rest()
    states = len(viseme)
    viseme_a = np.array(viseme)
    loop_a = np.array(loops)
    skip_a = np.array(skip_from)
    has_skip = skip_a >= 0
    neg = -np.inf

    def run(first: int, last: int, score: np.ndarray | None
            ) -> tuple[np.ndarray, np.ndarray]:
        """Frames first..last-1 from the scores after frame first - 1: the scores after
        the last, and each frame's move into each state (0 stay, 1 from the previous,
        2 over a rest)."""
        back = np.zeros((last - first, states), np.int8)
        for t in range(first, last):
            if t == 0:
                score = np.full(states, neg)
                score[0] = log_probs[0, _SIL]
                score[1] = log_probs[0, viseme_a[1]]
                continue
            stay = np.where(loop_a, score, neg)
            step = np.concatenate(([neg], score[:-1]))
            skip = np.full(states, neg)
            skip[has_skip] = score[skip_a[has_skip]]
            choice = np.argmax(np.stack([stay, step, skip]), axis=0)
            back[t - first] = choice
            score = np.choose(choice, [stay, step, skip]) + log_probs[t, viseme_a]
        return score, back

    # Moves are kept for one block of frames at a time, and the scores at each block's
    # start: a block is run again when the trace back reaches it. A recording that fits
    # in one block (about 5 minutes of speech) runs once.
    block = block_frames or max(1, BLOCK_BYTES // states)
    starts = range(0, frames, block)
    entry_scores = []
    score = None
    for first in starts:
        entry_scores.append(score)
        score, back = run(first, min(frames, first + block), score)
    # The end may be the last rest or the last word's last state (the rest skipped).
    state = max((states - 1, states - 2), key=lambda s: score[s])
    path_states = np.empty(frames, np.int64)
    for i in range(len(starts) - 1, -1, -1):
        first = starts[i]
        if i < len(starts) - 1:
            _, back = run(first, first + block, entry_scores[i])
        for t in range(min(frames, first + block) - 1, first - 1, -1):
            path_states[t] = state
            move = back[t - first, state]
            state = state if move == 0 else state - 1 if move == 1 else skip_a[state]
    path = viseme_a[path_states]
    owner = np.array(word_of)[path_states]
    spans = []
    for w in range(len(words)):
        at = np.flatnonzero(owner == w)
        spans.append((int(at[0]), int(at[-1]) + 1) if len(at) else (0, 0))
    return path, spans


def _span_times(times: np.ndarray, a: int, b: int, duration: float) -> tuple[float, float]:
    return max(0.0, times[a] - FRAME_S / 2), min(duration, times[b - 1] + FRAME_S / 2)


def _cues(times: np.ndarray, labels: np.ndarray, duration: float) -> list[VisemeCue]:
    """Each frame's label over [its instant ± half a frame], equal neighbours merged,
    contiguous, within [0, duration]."""
    cues: list[VisemeCue] = []
    for t, label in zip(times, labels):
        start, end = max(0.0, t - FRAME_S / 2), min(duration, t + FRAME_S / 2)
        if end <= start:
            continue
        value = OVR_VISEMES[label]
        if cues and cues[-1].value == value:
            cues[-1] = VisemeCue(cues[-1].start, end, value)
        else:
            cues.append(VisemeCue(cues[-1].end if cues else start, end, value))
    return cues
