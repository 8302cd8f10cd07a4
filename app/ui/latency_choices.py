"""The latency modes as a streamer chooses them: said by what each gives (how soon the
voice starts, how it sounds, how closely the mouth follows the microphone), quickest
response first, with this computer's measured first audio where there is one.

The modes' own one-line trades (the voice's and the microphone's: pipeline.core.modes
VOICE_TRADES, MIC_TRADES) stay as the details, in the tooltip. Everything here is read
from pipeline.core.modes, so the settings panel loads no voice or model to say it.
"""

from __future__ import annotations

from pipeline.core.modes import BALANCED, MIC_TRADES, MODE_NAMES, MODES_MS, PREMIUM, ULTRA, VOICE_TRADES

# Ultra and balanced start the voice equally soon: on the 2-core development VM their
# first audio was P50 36.9 and 37.8 ms, P99 49.3 and 49.2 ms over short sentences
# (bench/results/tts_latency.json). What ultra gains is the microphone's shorter look-ahead.
LABELS = {
    ULTRA: "Quickest mouth on the microphone",
    BALANCED: "Recommended: the voice starts at once",
    PREMIUM: "Best voice: each sentence read whole first",
}
EXPLANATIONS = {
    ULTRA: (f"The mouth follows your microphone with the least delay ({MODES_MS[ULTRA]} ms), "
            "its shapes a little less exact. The voice starts as soon as with the recommended "
            "mode, with slightly rougher joins, and takes more of the computer."),
    BALANCED: ("The voice starts at once: its first syllable is a quick preview, the rest "
               "exactly as the voice reads it. The mouth follows your microphone "
               f"{MODES_MS[BALANCED]} ms behind, its shapes nearly the most exact."),
    PREMIUM: ("The voice reads each sentence whole before it starts, so it sounds exactly as "
              "the voice reads it, and a long sentence waits longer to start. The mouth follows "
              f"your microphone {MODES_MS[PREMIUM]} ms behind, its shapes the most exact."),
}
# First-audio figures closer than this are one figure to a streamer: the run-to-run
# spread of a mode's first audio on the development VM (P99 - P50: 11.4-12.4 ms for
# ultra and balanced in bench/results/tts_latency.json). Closer ones are said as one
# bound, "within N ms", so a list never shows the quicker mode as the slower by noise.
SAME_FIGURE_MS = 12.0


def start_texts(measured_ms: dict[str, float]) -> dict[str, str]:
    """How soon the voice starts in each measured mode, in words."""
    texts = {}
    for name, figure in measured_ms.items():
        near = [other for other in measured_ms.values() if abs(other - figure) < SAME_FIGURE_MS]
        texts[name] = (f"voice starts in {figure:.0f} ms here" if len(near) == 1
                       else f"voice starts within {max(near):.0f} ms here")
    return texts


def choices(measured_ms: dict[str, float]) -> list[tuple[str, str, str]]:
    """(label, mode name, details) for each mode, in the order the list shows them."""
    starts = start_texts(measured_ms)
    return [(f"{LABELS[name]} — {starts[name]}" if name in starts else LABELS[name], name,
             f"{VOICE_TRADES[name]} {MIC_TRADES[name]}") for name in MODE_NAMES]
