"""How well the mouth on screen matches the sound heard: pure arithmetic over a
presentation log, shared by the live status line and the A/V-sync benchmark."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class SyncReport:
    offsets_ms: np.ndarray  # one per matched viseme change: shown − heard onset
    unmatched: int  # changes on screen with no onset of that viseme nearby

    @property
    def median_abs_ms(self) -> float:
        return float(np.median(np.abs(self.offsets_ms))) if len(self.offsets_ms) else float("nan")

    @property
    def p99_abs_ms(self) -> float:
        return float(np.percentile(np.abs(self.offsets_ms), 99)) if len(self.offsets_ms) else float("nan")

    @property
    def median_ms(self) -> float:
        return float(np.median(self.offsets_ms)) if len(self.offsets_ms) else float("nan")


def viseme_change_offsets(
    heard: np.ndarray, shown: np.ndarray, onset_times: np.ndarray, onset_visemes: np.ndarray,
    window: float,
) -> SyncReport:
    """Offsets between each change of the viseme on screen and the onset of that viseme
    in the audio.

    `heard[i]` is the media time heard when frame i appeared and `shown[i]` its dominant
    viseme; onsets are the media times at which each viseme starts in the speech. A change
    to viseme v at heard time h is matched to the nearest onset of v within `window`.
    """
    changes = np.nonzero(shown[1:] != shown[:-1])[0] + 1
    offsets: list[float] = []
    unmatched = 0
    for viseme in np.unique(shown[changes]):
        times = np.sort(onset_times[onset_visemes == viseme])
        at = heard[changes[shown[changes] == viseme]]
        if len(times) == 0:
            unmatched += len(at)
            continue
        right = np.clip(np.searchsorted(times, at), 0, len(times) - 1)
        left = np.clip(right - 1, 0, len(times) - 1)
        nearest = np.where(np.abs(at - times[left]) <= np.abs(at - times[right]), times[left], times[right])
        delta = at - nearest
        good = np.abs(delta) <= window
        offsets.extend(delta[good])
        unmatched += int((~good).sum())
    return SyncReport(np.asarray(offsets) * 1000.0, unmatched)
