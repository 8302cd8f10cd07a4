"""What timing a stream's written words costs and how well it times them, fed the two ways
pipeline/voice/captions.CaptionTrack takes them, in the same run, on the same plans:

- a plan at a time (`plan`: its words aligned together), as an API stream's cues and the
  command line's caption files feed it;
- a word at a time (`word`: aligned after each), as the live track was fed by the
  speaker's events before it gathered each plan's words.

The plans are made once (the real voice on the CPU, every latency mode)
from the latency bench's texts, hard cases (money, numbers, abbreviations, addresses) and
the soak's random texts, then fed to fresh tracks each way. Reported per way: CPU ms a
stream (a track's feeding and an API stream's cue messages, as app/api/speech_stream.py
makes them), sentences that fell back to showing the rest at once, and written words
that share their time with the word before (a fallback's, or a true merge such as "of
the" read as one word: the same in both ways).

Last line of output: one JSON object.
Usage: python bench/caption_words.py [--random-texts 60] [--out bench/results/caption_words.json]
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.api.speech_stream import Cues, _visemes, _word  # noqa: E402
from bench.machine import describe, publish  # noqa: E402
from bench.soak import random_text  # noqa: E402
from bench.tts_latency import TEXTS  # noqa: E402
from pipeline.voice.captions import CaptionTrack  # noqa: E402
from pipeline.voice.streaming_tts import LATENCY_MODES, AudioChunk, SentencePlan, StreamingTTS  # noqa: E402

HARD = (
    "It costs $5, up 3.5% since May; mail ann.lee@example.com to ask.",
    "It costs 25 dollars, one of the best in the world. We sold 1,234 today.",
    "Dr. Smith met Mr. O'Neil at 10:30 a.m. on Jan. 5th, 2024, well-known rivals!",
    "We went to a party after the show. Give it to a friend who needs it.",
    "Hello.World and well-known stuff, e.g. this; 42nd st.",
)


class _Fallbacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "could not time the words" in record.getMessage()


def _plans(tts: StreamingTTS, texts: list[str]) -> list[list[tuple[SentencePlan, float]]]:
    streams = []
    for text in texts:
        for mode in LATENCY_MODES.values():
            samples, plans = 0, []
            for item in tts.stream(text, mode):
                if isinstance(item, SentencePlan):
                    plans.append((item, samples / tts.sample_rate))
                elif isinstance(item, AudioChunk):
                    samples += len(item.samples)
            streams.append(plans)
    return streams


def _feed(tts: StreamingTTS, plans: list[tuple[SentencePlan, float]], by_plan: bool
          ) -> tuple[float, list]:
    """CPU ms to feed one stream's plans and make its cue messages; its words."""
    start = time.thread_time()
    track, sent = CaptionTrack(tts.phonemes_of, keep_all=True), 0
    for plan, offset in plans:
        if by_plan:
            track.plan(plan, offset)
        else:
            if plan.text:
                track.sentence(plan.text, offset, plan.typed)
            for w in plan.words:
                track.word(w.phonemes, offset + w.start, offset + w.end)
        if plan.ends_sentence:
            track.finish()
        words = track.words()
        Cues(_visemes(plan, offset), [_word(w) for w in words[sent:]]).message()
        sent = len(words)
    return (time.thread_time() - start) * 1e3, track.words()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--random-texts", type=int, default=60)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rng = random.Random(5)
    texts = [*TEXTS.values(), *HARD, *(random_text(rng, (1, 4)) for _ in range(args.random_texts))]
    tts = StreamingTTS(provider="cpu")
    streams = _plans(tts, texts)
    fallbacks = _Fallbacks()
    logging.getLogger("pipeline.voice.captions").addHandler(fallbacks)
    logging.getLogger("pipeline.voice.captions").setLevel(logging.INFO)
    report: dict = {"bench": "caption_words", "machine": describe(), "texts": len(texts),
                    "streams": len(streams), "plans": sum(len(s) for s in streams)}
    ways = {"by_plan": [], "by_word": []}
    shared = {"by_plan": 0, "by_word": 0}
    fell_back = {"by_plan": 0, "by_word": 0}
    for _ in range(3):  # rounds, each way in turn on each stream, so both meet the same load
        for way in ways:
            shared[way] = fell_back[way] = 0
        for plans in streams:
            for way in ways:
                before = fallbacks.count
                ms, words = _feed(tts, plans, way == "by_plan")
                ways[way].append(ms)
                fell_back[way] += fallbacks.count - before
                shared[way] += sum((a.start, a.end) == (b.start, b.end) for a, b in zip(words, words[1:]))
    for way, ms in ways.items():
        report[way] = {"cpu_ms_per_stream_p50": round(float(np.percentile(ms, 50)), 3),
                       "cpu_ms_per_stream_mean": round(float(np.mean(ms)), 3),
                       "sentences_fell_back": fell_back[way],
                       "words_sharing_the_time_before": shared[way]}
    report["words"] = sum(len(_feed(tts, plans, True)[1]) for plans in streams)
    report["mean_ratio_by_word_to_by_plan"] = round(
        report["by_word"]["cpu_ms_per_stream_mean"] / report["by_plan"]["cpu_ms_per_stream_mean"], 2)
    publish(report, args.out)


if __name__ == "__main__":
    main()
