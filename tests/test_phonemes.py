"""pipeline.voice.phonemes: how the bundled voice reads text."""

import gc
import sys

import pytest

from piper import PiperVoice

from pipeline.voice.phonemes import load_voice_config, phonemize

TEXTS = ("hello chat welcome back to the stream, today we are building.", "Is it a robot? Yes!")


def test_phonemizing_keeps_no_python_objects():
    """piper-tts 1.8.0's espeakbridge leaked each clause's tuple and phoneme string: 2
    blocks a clause, 4.0 a call over these two-clause texts (measured before the mend).
    With it, a thousand calls leave next to none (measured: 0.002 a call, other
    interpreter noise); the bound is a tenth of one leaked clause a call."""
    voice = PiperVoice(session=None, config=load_voice_config())
    assert phonemize(voice, TEXTS[1]) == [list("ɪz ɪɾ ɐ ɹˈoʊbɑːt?"), list("jˈɛs!")]
    gc.collect()
    before = sys.getallocatedblocks()
    for i in range(1000):
        phonemize(voice, TEXTS[i % 2])
    gc.collect()
    assert (sys.getallocatedblocks() - before) / 1000 < 0.2


def test_phonemizing_keeps_no_native_memory():
    """espeak-ng's SetVoiceByName leaked ~1.3 KB natively a call (3.89 MB per 3,000 calls,
    measured), and piper's phonemizer set the voice before every text: +1.3 MB per
    thousand texts before the mend. The bound is a tenth of that; the same thousand
    after it: under 0.01 MB (measured)."""
    from app.heap import heap_figures

    voice = PiperVoice(session=None, config=load_voice_config())
    phonemize(voice, TEXTS[0])
    gc.collect()
    before = heap_figures()["malloc_mb"]
    if before is None:
        pytest.skip("this C library has no mallinfo2 to read malloc's bytes in use from")
    for i in range(1000):
        phonemize(voice, TEXTS[i % 2])
    gc.collect()
    assert heap_figures()["malloc_mb"] - before < 0.13
