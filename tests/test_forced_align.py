"""Transcript-assisted cues (pipeline.lipsync.forced_align) on real speech: pocketsphinx
5.1.1's recordings (part of bench/lipsync_eval.py's dev set, fetched from the package
index on first use into .cache/), scored against the same reference the bench uses
(pocketsphinx's phone alignment of each clip's transcript, kept in
tests/data/lipsync_dev_phones.json as bench/real_speech/align.py's sphinx_phones made it)."""

from __future__ import annotations

import json
import wave
from pathlib import Path

import numpy as np
import pytest

from bench.lipsync_eval import cues_at_frames, score
from bench.real_speech import pocketsphinx_clips
from bench.real_speech.align import reference
from pipeline.audio.audio_file import AudioFileError, read_blocks
from pipeline.lipsync.forced_align import (
    TranscriptError,
    _viterbi,
    lip_frames,
    transcript_cues,
    transcript_words,
)
from pipeline.lipsync.model import infer_file

PHONES = json.loads((Path(__file__).parent / "data" / "lipsync_dev_phones.json").read_text())


@pytest.fixture(scope="module")
def dev_set(tmp_path_factory) -> list[tuple[str, Path, np.ndarray, str]]:
    """(name, the clip as a 16 kHz WAV file, its reference per 10 ms frame, transcript)."""
    folder = tmp_path_factory.mktemp("dev")
    out = []
    for clip in pocketsphinx_clips.clips(pocketsphinx_clips.CACHE):
        name, audio, text = clip.name, clip.audio, clip.text
        path = folder / (name.replace("/", "_") + ".wav")
        with wave.open(str(path), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes((np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes())
        out.append((name, path, reference(PHONES[name], len(audio) // 160), text))
    return out


def test_aligned_cues_beat_the_free_model_on_real_speech(dev_set):
    refs, aligned, free = [], [], []
    for _, path, ref, text in dev_set:
        result = transcript_cues(path, text)
        cues = result.cues
        # The cue list's invariant: contiguous from 0 to within half a frame of the end.
        assert cues[0].start == 0.0
        assert all(a.end == b.start for a, b in zip(cues, cues[1:]))
        with wave.open(str(path)) as w:
            assert 0 <= w.getnframes() / 16000 - cues[-1].end <= 0.005 + 1e-9
        refs.append(ref)
        aligned.append(cues_at_frames(cues, len(ref)))
        free.append(cues_at_frames(infer_file(path), len(ref)))
    ref = np.concatenate(refs)
    with_text = score(ref, np.concatenate(aligned), np.concatenate(aligned))
    without = score(ref, np.concatenate(free), np.concatenate(free))
    # Measured on this set: 0.755 / 0.794 with the transcript, 0.581 / 0.685 without.
    assert with_text["viseme15_accuracy"] > without["viseme15_accuracy"]
    assert with_text["coarse_balanced_accuracy"] > without["coarse_balanced_accuracy"]
    assert with_text["pp_recall"] > without["pp_recall"]


def test_a_word_the_audio_does_not_hold_is_reported_with_the_free_models_cues(dev_set):
    _, path, _, text = next(clip for clip in dev_set if clip[0] == "goforward")
    assert text == "go forward ten meters"
    assert transcript_cues(path, text).unsupported == []
    # "shoe" (CH ou) for "meters" (PP ih DD RR SS): no sound in common.
    result = transcript_cues(path, "go forward ten shoe")
    assert [u.text for u in result.unsupported] == ["shoe"]
    shoe = result.unsupported[0]
    # Not invented: where the word was put, the cues are those `lipsync` writes without text.
    free = infer_file(path)
    centres = np.arange(shoe.start + 0.005, shoe.end - 0.005, 0.01)
    assert len(centres) >= 3
    shown = [next(c.value for c in cues if c.start <= t < c.end) for cues in (result.cues, free)
             for t in centres]
    assert shown[:len(centres)] == shown[len(centres):]


def test_another_clips_transcript_is_reported_word_by_word(dev_set):
    by_name = {name: (path, text) for name, path, _, text in dev_set}
    path, _ = by_name["librivox/0880"]
    _, other = by_name["librivox/0870"]
    words = [w.text for w in transcript_words(other)]
    result = transcript_cues(path, other)
    reported = [u.text for u in result.unsupported]
    # Each report is one of the transcript's words, in order, with where it was put.
    it = iter(words)
    assert all(word in it for word in reported)
    assert all(0 <= u.start < u.end for u in result.unsupported)
    # Measured: 9 of its 14 words are reported (and 2 of the dev set's 96 words when each
    # clip has its own transcript); more than half must be.
    assert len(reported) > len(words) / 2


@pytest.mark.parametrize("text, says", [
    ("", "The transcript is empty"),
    ("   \n", "The transcript is empty"),
    ("🙂 🎉", "The transcript has no words to align: Nothing to speak: the text has only emoji."),
    ("— … —", "The transcript has no words to align"),
])
def test_a_transcript_with_nothing_to_align_is_refused_in_one_line(dev_set, text, says):
    _, path, _, _ = dev_set[0]
    with pytest.raises(TranscriptError) as raised:
        transcript_cues(path, text)
    message = str(raised.value)
    assert message.startswith(says)
    assert "\n" not in message


def test_a_recording_too_short_for_its_words_reports_them_all(dev_set, tmp_path):
    _, path, _, text = next(clip for clip in dev_set if clip[0] == "goforward")
    short = tmp_path / "short.wav"
    with wave.open(str(path)) as source, wave.open(str(short), "wb") as w:
        w.setparams(source.getparams())
        # 50 ms: five frames for the words' 16 sounds, which need one frame each at least.
        w.writeframes(source.readframes(800))
    result = transcript_cues(short, text)
    assert [u.text for u in result.unsupported] == text.split()
    assert result.cues and result.cues[-1].end <= 0.05


@pytest.mark.parametrize("block_frames", [1, 37, 500])
def test_the_path_does_not_depend_on_how_the_moves_are_kept(dev_set, block_frames):
    # A recording past one block (BLOCK_BYTES, ~5 minutes of speech) is traced back a
    # block at a time; blocks of 1, 37 and 500 frames (librivox/0870 has 709) must give
    # the one-block path.
    for name in ("librivox/0870", "goforward"):
        path, text = next((p, t) for n, p, _, t in dev_set if n == name)
        rate, blocks = read_blocks(path)
        _, probs = lip_frames(np.concatenate(list(blocks)), rate)
        log_probs = np.log(np.maximum(probs, 1e-4))
        words = transcript_words(text)
        whole, whole_spans = _viterbi(log_probs, words)
        parts, part_spans = _viterbi(log_probs, words, block_frames)
        assert np.array_equal(whole, parts)
        assert whole_spans == part_spans


def test_a_file_that_is_not_audio_is_refused_as_lipsync_refuses_it(tmp_path):
    path = tmp_path / "notes.wav"
    path.write_text("not audio at all")
    with pytest.raises(AudioFileError, match="is not an audio or video file this app can read"):
        transcript_cues(path, "go forward ten meters")
