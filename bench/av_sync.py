"""A/V sync of the running app: speaks 20 sentences through the real audio path (PortAudio
on a JACK dummy server) into the real window (Xvfb + Mesa GL), and scores every presented
frame against the speech's phoneme onsets.

Last line of output: one JSON object. Baseline in the same run: the same ticks as a
wall-clock renderer would show them — a mouth timeline started when the audio was handed
to the device, ignoring output latency and the time to presentation (what simple
text-driven lip sync does).

Also counts the speeches that fell behind playback (a gap or an underrun): on 2 cores with
software GL, drawing competes with the voice for the CPU.

Usage: python bench/av_sync.py [--sentences 20] [--software-gl-fps N] [--out bench/results/FILE.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import describe, publish  # noqa: E402

SENTENCES = [
    "Hello everyone, welcome back to the stream.",
    "Today we are building a tiny robot out of paper and glue.",
    "My favourite food is pizza with mushrooms and fresh basil.",
    "Please remember to follow the channel if you enjoy the show.",
    "The weather outside is cold, so I made a big cup of cocoa.",
    "Five brave foxes jumped over the muddy puddle by the barn.",
    "Could you pass me the blue marker on the left side?",
    "We reached level thirty two after nearly four hours of play.",
    "Thank you so much for the kind messages in the chat.",
    "Bob bought a bag of big purple plums from the market.",
    "I think the boss fight needs a better strategy this time.",
    "Music helps me focus when the puzzle gets really tricky.",
    "Sometimes the simplest answer is the one we overlook.",
    "Maybe we should try the map on the other monitor.",
    "Very few people know that owls cannot move their eyes.",
    "The voice you hear is made on this computer in real time.",
    "Let us check the question from Martha in the chat.",
    "Wow, that was a fantastic move, everyone saw it.",
    "Before we finish, I want to show you my new avatar.",
    "See you next week, and stay awesome, my friends!",
]


def _shown(onset_times: np.ndarray, onset_visemes: np.ndarray, at: np.ndarray) -> np.ndarray:
    index = np.searchsorted(onset_times, at, side="right") - 1
    return np.where(index >= 0, onset_visemes[np.clip(index, 0, None)], 0)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--software-gl-fps", type=int, default=None,
                        help="the app's frame rate on software GL (default: the setting's default)")
    args = parser.parse_args()

    from tests.harness.services import JackServer, Xvfb

    xvfb = Xvfb()
    os.environ["DISPLAY"] = xvfb.display
    jack_server = JackServer(period=256)
    from PySide6.QtWidgets import QApplication

    app = QApplication(["av-sync-bench"])
    from app.settings import Settings
    from pipeline.core.sync_metrics import viseme_change_offsets
    from render.outputs.avatar_view import PRESENTED
    from tests.harness.app_driver import open_window, pump, say, wait_until_quiet

    with tempfile.TemporaryDirectory() as config:
        chosen = {} if args.software_gl_fps is None else {"software_gl_fps": args.software_gl_fps}
        window = open_window(Path(config), Settings(audio_output_device="system", **chosen))
        engine = window.engine
        period = window.view.period
        counters_before = window.view.slots.counters()
        log_start = len(window.view.presentation_log())
        onset_times, onset_visemes, first_audio, fell_behind = [], [], [], []
        leads, slacks = [], []
        for i, text in enumerate((SENTENCES * 2)[: args.sentences]):
            leads.append(engine.speaker.start_lead.lead_s * 1000)
            say(window, text)
            first_audio.append(window.first_audio.heard_ms)
            wait_until_quiet(window, margin=0.25)
            if window.finished.least_slack_s is not None:
                slacks.append(window.finished.least_slack_s * 1000)
            if window.finished.gaps or window.finished.underruns:
                fell_behind.append([i, window.finished.gaps, window.finished.underruns])
            times, visemes = engine.timeline.onsets()
            onset_times.append(times)
            onset_visemes.append(visemes)
        pump(0.2)
        stats = window.view.stats()
        counters = window.view.slots.counters()
        log = window.view.presentation_log()[log_start:]
        output_latency = engine.output.output_latency
        safety = engine.output.SAFETY_BLOCKS * engine.output.max_block / engine.output.sample_rate
        window.close()
    app.processEvents()
    # Free Qt's X connection before the X server goes (Qt aborts the process otherwise).
    import shiboken6

    from pipeline.audio.devices import portaudio_released

    shiboken6.delete(app)

    # PortAudio lets go of the server before it stops, every stream closed first.
    with portaudio_released():
        jack_server.stop()
    xvfb.stop()

    times = np.concatenate(onset_times)
    visemes = np.concatenate(onset_visemes)
    order = np.argsort(times, kind="stable")
    times, visemes = np.unique(np.stack([times[order], visemes[order]]), axis=1)
    visemes = visemes.astype(np.int16)
    presented = log[log["status"] == PRESENTED]
    ours = viseme_change_offsets(presented["heard"], presented["viseme"], times, visemes, 0.1)

    # The wall-clock baseline sees media time as "time since the audio was handed over":
    # it runs ahead of what is heard by the device's output latency, the scheduling
    # margin, and the time from tick to presentation.
    lead = output_latency + safety + (presented["predicted"] - presented["tick"])
    naive_shown = _shown(times, visemes, presented["heard"] + lead + period / 2)
    naive = viseme_change_offsets(presented["heard"], naive_shown, times, visemes, 0.2)

    period_ms = 1000 * period
    ticks = np.diff(log["tick"]) * 1000
    result = {
        "bench": "av_sync",
        "machine": describe("Xvfb + Mesa llvmpipe, JACK dummy 48 kHz/256"),
        "sentences": args.sentences,
        "viseme_changes_scored": int(len(ours.offsets_ms)),
        "viseme_changes_unmatched": ours.unmatched,
        "offset_median_ms": round(ours.median_abs_ms, 2),
        "offset_signed_median_ms": round(ours.median_ms, 2),
        "offset_p99_ms": round(ours.p99_abs_ms, 2),
        "tick_ms": round(period_ms, 3),
        "frames_presented": counters["presented"] - counters_before["presented"],
        "frames_late": counters["late"] - counters_before["late"],
        "frames_held": counters["held"] - counters_before["held"],
        "frames_interpolated": counters["interpolated"] - counters_before["interpolated"],
        "frames_degraded_shown": counters["degraded_shown"] - counters_before["degraded_shown"],
        "frames_dropped_by_producer": counters["dropped"] - counters_before["dropped"],
        "tick_jitter_ms": round(float(np.std(ticks)), 3),
        "tick_lateness_ms": stats["tick_jitter_ms"],
        "tick_interval_p99_ms": round(float(np.percentile(ticks, 99)), 3),
        "missed_ticks": stats["missed_ticks"],
        "display_mode": stats["display_mode"],
        # Heard first audio: Enter to the first sample at the DAC, the latency a user feels.
        "first_audio_ms_p50": round(float(np.median(first_audio)), 1),
        "first_audio_ms": [round(float(v), 1) for v in first_audio],
        # The speaker's start lead before each speech, and each speech's least chunk slack
        # (how early its chunks after the first were ready), which steers the lead.
        "start_lead_ms": [round(v, 1) for v in leads],
        "least_slack_ms": [round(v, 1) for v in slacks],
        # [sentence, gaps, underruns] of each speech that fell behind playback.
        "speeches_fell_behind": fell_behind,
        "audio_output_latency_ms": round(output_latency * 1000, 2),
        "baseline_wallclock": {
            "offset_median_ms": round(naive.median_abs_ms, 2),
            "offset_signed_median_ms": round(naive.median_ms, 2),
            "offset_p99_ms": round(naive.p99_abs_ms, 2),
        },
        "ratio_offset_median_baseline_over_ours": round(naive.median_abs_ms / ours.median_abs_ms, 2),
        "goals": {
            "offset_median_le_5ms": ours.median_abs_ms <= 5,
            "offset_p99_le_one_tick": ours.p99_abs_ms <= period_ms,
            "zero_late_frames": counters["late"] == counters_before["late"],
            "heard_first_audio_p50_le_40ms": float(np.median(first_audio)) <= 40,
            "no_speech_fell_behind": not fell_behind,
        },
    }
    publish(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
