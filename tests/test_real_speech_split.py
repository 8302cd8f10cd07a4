"""The real-speech dev/train split, the references it is scored on and the training
labels made from them: pure code, no fetching (the sources have their own tests)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from bench.real_speech import dev_set
from bench.real_speech.align import HOP, align_words, espeak_pronunciation, reference
from bench.real_speech.clip import SAMPLE_RATE, Clip
from pipeline.core.visemes import VISEME_INDEX

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packaging"))
from lipsync_data import frame_labels  # noqa: E402
from real_speech_corpus import spans  # noqa: E402


def clip(name: str, source: str, speaker: str, seconds: float) -> Clip:
    return Clip(name, source, speaker, "?", "clean",
                np.zeros(int(seconds * SAMPLE_RATE), np.float32), "a", "test")


def test_split_keeps_every_voice_on_one_side_and_caps_it():
    dev_character = sorted(dev_set.DEV_CHARACTERS)[0]
    clips = ([clip(f"f{i}", "fotaq", dev_character, 7.0) for i in range(20)]
             + [clip(f"t{i}", "fotaq", "fotaq/joe", 70.0) for i in range(30)]
             + [clip(f"a{i}", "asterisk", "asterisk/allison", 100.0) for i in range(3)]
             + [clip(f"m{i}", "mfa", "mfa/michael", 20.0) for i in range(10)])
    dev, train = dev_set.split(clips)
    dev_voices, train_voices = {c.speaker for c in dev}, {c.speaker for c in train}
    assert dev_voices == {dev_character, "mfa/michael"}
    assert train_voices == {"fotaq/joe", "asterisk/allison"}

    def seconds(part, speaker):
        return sum(c.seconds for c in part if c.speaker == speaker)

    # Each voice gets its first clips up to its cap, no more (clips are whole).
    assert seconds(dev, dev_character) == 8 * 7.0 <= dev_set.DEV_CHARACTER_CAP_S
    assert seconds(dev, "mfa/michael") == 4 * 20.0 <= dev_set.DEV_SPEAKER_CAP_S
    assert seconds(train, "fotaq/joe") == 14 * 70.0 <= dev_set.TRAIN_SPEAKER_CAP_S
    assert seconds(train, "asterisk/allison") == 300.0  # the one uncapped voice
    assert [c.name for c in dev if c.speaker == "mfa/michael"] == ["m0", "m1", "m2", "m3"]


def test_reference_maps_pocketsphinx_phones_onto_frames():
    phones = [("SIL", 0, 3), ("B", 3, 2), ("AH1", 5, 4), ("M", 9, 1), ("+NSN+", 10, 2)]
    ref = reference(phones, 14)
    names = [list(VISEME_INDEX)[v] for v in ref]
    assert names == ["sil"] * 3 + ["PP"] * 2 + ["aa"] * 4 + ["PP"] + ["sil"] * 4


def test_align_words_spells_the_transcript_as_the_dictionary_does():
    assert align_words("Don’t PANIC, it's (only) a test!") == "don't panic it's only a test"
    assert align_words("'Hello'") == "hello"


def test_words_the_dictionary_lacks_get_the_voices_pronunciation():
    assert espeak_pronunciation("aligner") == "AH L AY N ER"
    assert espeak_pronunciation("unmute") == "AH N M Y UW T"
    # A doubled consonant at a join is one phone for pocketsphinx.
    assert "R R" not in espeak_pronunciation("azura")


def test_training_labels_from_a_reference_land_on_its_frames():
    """real_speech_corpus.spans turns the reference into the spans lipsync_data labels
    from; the label at instant 10 m ms is reference frame m - 1, whose window centre
    (10 m + 2.8 ms) is the nearest to that instant."""
    rng = np.random.default_rng(3)
    ref = np.repeat(rng.integers(0, 15, 40), rng.integers(1, 6, 40))
    found = spans(ref)
    assert all(a[2] == b[1] for a, b in zip(found, found[1:]))
    labels, _ = frame_labels(found, len(ref) + 1)
    assert np.array_equal(labels[1:], ref)
    assert len(ref) * HOP / SAMPLE_RATE - found[-1][2] < HOP / SAMPLE_RATE
