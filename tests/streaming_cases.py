"""The sentences and helpers that compare the streamed voice with whole-sentence synthesis,
shared by tests/test_streaming_tts.py and bench/stream_exactness.py (which measures the
rounding the exactness bound is derived from, on each CPU kind)."""

from __future__ import annotations

import numpy as np
from piper.config import SynthesisConfig
from piper.const import BOS, EOS

from pipeline.voice.streaming_tts import GAIN, LATENCY_MODES, AudioChunk, SentencePlan
from pipeline.voice.phonemes import spoken_sentences, symbol_ids

# Long enough that balanced mode voices them in more than one acoustic window.
WINDOWED = [
    "Today we are building a tiny robot out of paper and glue, and after that we will "
    "paint it red and give it a name.",
    "Before we finish tonight I want to show you the new avatar that my friend designed "
    "for the channel with a bright green jacket and a tiny hat and a mouth that follows "
    "every word I say.",
]

# Short sentences that fit balanced mode's first window, so nothing is windowed: what
# differs from whole-sentence synthesis is only the preview and the chunking.
SHORT = ["Stop!", "Well, hello.", "Papa.", "Go!", "Yes.", "Bam!", "Zap zap.", "Sure.",
         "Oh no!", "Fine.", "Hi!", "Tada!", "Kick it.", "Sit.", "Chat?", "Wow.", "Jump!",
         "Fish.", "Thanks!", "Peace.", "Cool.", "Bye!", "Next.", "Sweet.", "Quick!", "Test."]
# A sentence shorter than one vocoder window has its last chunk padded past its end;
# the padding reaches back into its trailing silence (measured over SHORT: at most
# 1.75e-4, -75 dB, and none earlier than 56 ms before the end).
END_S = 0.060

# (text, mode name) of the streams that must equal whole-sentence synthesis.
EXACT_CASES = [
    *[(text, "balanced") for text in SHORT],
    *[(text, "premium") for text in SHORT[:8]],
    (WINDOWED[0], "premium"),  # premium reads any sentence up to 480 phonemes whole
]


def collect(stream):
    """[(plan, [chunks])] in stream order, checking that chunks only follow a plan."""
    groups = []
    for item in stream:
        if isinstance(item, SentencePlan):
            groups.append((item, []))
        else:
            assert isinstance(item, AudioChunk) and groups, "audio before its plan"
            groups[-1][1].append(item)
    return groups


def audio_of(groups):
    return np.concatenate([c.samples for _, chunks in groups for c in chunks])


def timeline_of(groups):
    """Folded phonemes of all plans on one timeline: [(phoneme, start, end)]."""
    out, offset = [], 0.0
    for plan, _ in groups:
        out += [(p.phoneme, p.start + offset, p.end + offset) for p in plan.phonemes]
        offset += plan.total_samples / plan.sample_rate
    return out


def whole_audio(whole, text):
    """`text` (one sentence) as the stock piper voice `whole` renders it, noise off."""
    (_, phonemes), = spoken_sentences(whole, text)
    ids, _ = symbol_ids([BOS, *phonemes, EOS], whole.config.phoneme_id_map)
    raw = whole.phoneme_ids_to_audio(ids, SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0))
    return np.clip(raw * GAIN, -1.0, 1.0)


def stream_and_whole(tts, whole, text, mode):
    groups = collect(tts.stream(text, mode))
    assert len(groups) == 1
    chunks = groups[0][1]
    ours, reference = audio_of(groups), whole_audio(whole, text)
    assert len(ours) == len(reference)
    return chunks, ours, reference


def exact_region(tts, whole, text, mode_name):
    """(streamed, whole, start, end): samples [start, end) must be exact. Balanced mode's
    first two chunks are a preview; the last END_S may hold the padded chunk's tail."""
    mode = LATENCY_MODES[mode_name]
    chunks, ours, reference = stream_and_whole(tts, whole, text, mode)
    assert len(chunks) >= 4, "the point is to stitch several chunks"
    start = sum(len(c.samples) for c in chunks[:2]) if mode.previews else 0
    end = len(ours) - int(END_S * tts.sample_rate)
    return ours, reference, start, end


# What "equal" means for fp32 audio. Stock piper is not bit-stable itself: the same
# sentence run with onnxruntime's graph fusions off differs from the fused run by an SNR of
# 77.6 dB at worst over EXACT_CASES on an AVX2 CPU and 84.4 dB on an AVX-512 one (median 93
# / 92 dB; bench/results/stream_exactness_*.json): that is what two equally right orders of
# fp32 additions differ by.
KERNEL_ROUNDING_SNR_DB = 77.0


def snr_db(reference: np.ndarray, other: np.ndarray) -> float:
    """How far `other` is from `reference`: signal over difference power, in dB."""
    noise = float(np.sum((other - reference).astype(np.float64) ** 2))
    signal = float(np.sum(reference.astype(np.float64) ** 2))
    return float("inf") if noise == 0 else float(10 * np.log10(signal / noise))
