"""The start lead: a jitter buffer for the start of speech.

Playback of a speech begins this far behind its first chunk, so the next chunks have
time to arrive. The lead doubles after a speech that had underruns and, after a clean
one, gives back half of what went unused: the least slack of the chunks after the first
(how long before its place could no longer be written each was written) beyond
SLACK_MARGIN_S. The first chunk's own slack is the lead itself, so it says nothing.

How low it may go depends on the machine the voice runs on (`floor_for`): on the CPU
later chunks come close to real time, on a GPU far ahead of it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

# A fresh app starts cautious: its first speeches pay first-use costs (caches, numpy and
# onnxruntime code paths, a UI just started), and on 2 cores a 45 ms lead still let a
# first speech underrun in 1 of ~20 test runs.
START_LEAD_INITIAL_S = 0.06
START_LEAD_MAX_S = 0.2
# The least lead on the CPU. Steered by slack alone (a 5 ms floor), the lead came down to
# 8-30 ms in bench/av_sync.py on 2 cores, and 3 of 20 speeches then fell behind at both
# 30 and 60 fps (chunks up to 64 ms later against the first than in the speech before),
# for no gain in heard first audio (P50 113 ms against 114 with this floor): the rest of
# it is synthesis, the output's safety blocks and the device. Measured in the app on 2
# cores with software GL: with a 30 ms lead the third chunk arrived 13-24 ms before it
# was due, and 1 in ~8 first speeches had a late chunk; 45 ms gives it a margin of ~30 ms.
START_LEAD_MIN_S = 0.045
# The least lead where every engine of the voice runs on a GPU, whose later chunks come
# far ahead of real time (the 2,000-word real-time factor is 0.008 on the H200).
# Not yet measured on a GPU: bench/gpu.py's heard-first-audio sweep plays 20 speeches at
# each candidate floor to choose it.
DEVICE_START_LEAD_MIN_S = 0.003
# Slack kept beyond what speeches used: one JACK period (10.7 ms), the granularity at
# which the output callback takes audio, so a chunk a period later than any measured
# still plays.
SLACK_MARGIN_S = 0.011


def floor_for(on_device: bool) -> float:
    """The least start lead for a voice whose engines all run on a GPU (`on_device`), or
    not."""
    return DEVICE_START_LEAD_MIN_S if on_device else START_LEAD_MIN_S


@dataclass(slots=True)
class StartLead:
    """The lead (seconds) the next speech starts with; invariant: floor_s <= lead_s <=
    START_LEAD_MAX_S."""

    floor_s: float = START_LEAD_MIN_S
    lead_s: float = START_LEAD_INITIAL_S

    def __post_init__(self) -> None:
        self.lead_s = min(START_LEAD_MAX_S, max(self.floor_s, self.lead_s))

    def adapt(self, late_events: int, least_slack_s: float | None) -> None:
        """After a speech: `late_events` chunks came too late (underruns and gaps), and
        the least slack of its chunks after the first (None: it had no such chunk)."""
        if late_events:
            self.lead_s = min(START_LEAD_MAX_S, 2 * self.lead_s)
            log.info("speech fell behind playback %d time(s): starting %.0f ms later from now on",
                     late_events, self.lead_s * 1000)
            return
        if least_slack_s is not None and least_slack_s > SLACK_MARGIN_S:
            unused = least_slack_s - SLACK_MARGIN_S
            self.lead_s = max(self.floor_s, self.lead_s - unused / 2)
