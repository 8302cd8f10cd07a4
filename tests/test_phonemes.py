"""pipeline.voice.phonemes: how the bundled voice reads text."""

import gc
import sys

import pytest
from hypothesis import given, strategies as st

from piper import PiperVoice, espeakbridge

from bench.phonemes_together import bridge_as_shipped
from bench.tts_latency import TEXTS as BENCH_TEXTS
from pipeline.voice.phonemes import _ESPEAK, load_voice_config, phonemize
from tests.harness.gil import python_run_by_others
from tests.fuzzing import ANY_CHAR, EDGE_STRINGS, examples, typed_text

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


def _clauses_or_error(get, text):
    try:
        return get(text)
    except (ValueError, UnicodeError) as exc:
        return type(exc).__name__, str(exc)


@pytest.fixture(scope="module")
def shipped():
    voice = PiperVoice(session=None, config=load_voice_config())
    phonemize(voice, "hello")  # espeak-ng initialized and the voice's language set
    bridge = bridge_as_shipped()
    assert bridge is not espeakbridge and bridge.get_phonemes is not espeakbridge.get_phonemes
    return bridge


MIXED = (
    *BENCH_TEXTS.values(),
    'Is it a robot? Yes! "Quoted," she said: ok; fine... wait — really?! (No.)',
    "Dr. Smith paid $3.50 at 10:30 a.m. on 2026-11-29, e.g. 100% of 1,000,000.",
    "café naïve Zoë façade; 日本語 Привет مرحبا 🙂 𝄞",
    "", " ", "...", "?!", "a\x00b", "\ud800", "word" * 300,
    *EDGE_STRINGS,
)


def test_the_clauses_are_those_of_pipers_bridge_on_mixed_text(shipped):
    """The same espeak-ng function of the same library, called through ctypes: the same
    clauses, terminators and sentence ends as piper's C bridge, and the same errors for
    text it cannot take (a NUL, a lone surrogate)."""
    for text in MIXED:
        with _ESPEAK:
            ours = _clauses_or_error(espeakbridge.get_phonemes, text)
            theirs = _clauses_or_error(shipped.get_phonemes, text)
        assert ours == theirs, text


@examples(150)
@given(text=st.one_of(typed_text(), st.text(ANY_CHAR, max_size=40)))
def test_the_clauses_are_those_of_pipers_bridge_on_typed_text(shipped, text):
    with _ESPEAK:
        assert (_clauses_or_error(espeakbridge.get_phonemes, text)
                == _clauses_or_error(shipped.get_phonemes, text))


def test_other_threads_run_python_while_espeak_reads():
    """espeak-ng's reading lets the GIL go (tests/harness/gil.py). piper's bridge held it
    for the whole read: 0 counts over 20 reads of a 60-word sentence (measured)."""
    voice = PiperVoice(session=None, config=load_voice_config())
    text = BENCH_TEXTS["long60"]
    phonemize(voice, text)
    assert python_run_by_others(lambda: [espeakbridge.get_phonemes(text) for _ in range(5)]) > 0
