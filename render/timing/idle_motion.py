"""Life between words: eye blinks and breathing, as pure functions of time.

Pure so that any frame can be rendered for any instant (replays, exports, a frame
rendered late) and the same seed gives the same avatar. Randomness comes from a
counter-based hash of (seed, blink number), not from a stateful generator: the blink
that lies near t is found in O(1) without replaying the ones before it.

Blinks sit on a jittered grid: blink i starts at i·MEAN + u·JITTER with u uniform in
[-1, 1], so consecutive blinks are 2–6 s apart and 4 s on average, the rhythm of a
relaxed person; some are followed by a second one (a double blink).
"""

from __future__ import annotations

import math

from pipeline.core.avatar_state import AvatarState
from pipeline.core.easing import smoothstep

BLINK_MEAN_INTERVAL = 4.0
BLINK_JITTER = 1.0
DOUBLE_BLINK_CHANCE = 0.12
DOUBLE_BLINK_GAP = (0.22, 0.32)
# Lids close faster than they open; the whole blink lasts about 150 ms.
BLINK_CLOSE = 0.055
BLINK_SHUT = 0.02
BLINK_OPEN = 0.085
BLINK_DURATION = BLINK_CLOSE + BLINK_SHUT + BLINK_OPEN

BREATH_RATE_HZ = 0.25
# Breathing is felt rather than seen: under 1 % of the canvas height.
BREATH_SCALE = 0.006
BREATH_OFFSET = 0.004

_MASK = (1 << 64) - 1


def hash01(seed: int, n: int, salt: int) -> float:
    """Uniform in [0, 1) from (seed, n, salt): splitmix64 finaliser."""
    z = (seed * 0x9E3779B97F4A7C15 + n * 0xBF58476D1CE4E5B9 + salt * 0x94D049BB133111EB) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    z ^= z >> 31
    return (z >> 11) / float(1 << 53)


def blink_start(i: int, seed: int = 0) -> float:
    """Start time of the i-th blink (the first of a double blink)."""
    return i * BLINK_MEAN_INTERVAL + (2.0 * hash01(seed, i, 1) - 1.0) * BLINK_JITTER


def double_blink_gap(i: int, seed: int = 0) -> float | None:
    """Delay from blink i to its second blink, or None when blink i is single."""
    if hash01(seed, i, 2) >= DOUBLE_BLINK_CHANCE:
        return None
    lo, hi = DOUBLE_BLINK_GAP
    return lo + (hi - lo) * hash01(seed, i, 3)


def _lid(dt: float) -> float:
    """Eyelid closure dt seconds into one blink: 0 open, 1 shut."""
    if dt < 0.0 or dt >= BLINK_DURATION:
        return 0.0
    if dt < BLINK_CLOSE:
        return smoothstep(dt / BLINK_CLOSE)
    dt -= BLINK_CLOSE
    if dt < BLINK_SHUT:
        return 1.0
    return smoothstep(1.0 - (dt - BLINK_SHUT) / BLINK_OPEN)


def blink(t: float, seed: int = 0) -> float:
    """Eyelid weight at time t: 0 eyes open, 1 eyes closed."""
    # t lies within ±MEAN/2 of i·MEAN; blink i starts within ±JITTER of it and is over
    # (double included) before the half-way point on either side, so no other blink
    # can cover t.
    i = math.floor(t / BLINK_MEAN_INTERVAL + 0.5)
    start = blink_start(i, seed)
    weight = _lid(t - start)
    gap = double_blink_gap(i, seed)
    if gap is not None:
        weight = max(weight, _lid(t - start - gap))
    return weight


def breathing(t: float, seed: int = 0) -> float:
    """Breathing phase at t in [-1, 1] (+1 full inhale). The rate wanders slowly around
    0.25 Hz so it never looks like a metronome."""
    phase0 = 2.0 * math.pi * hash01(seed, 0, 4)
    wander = 0.6 * math.sin(2.0 * math.pi * 0.031 * t + phase0)
    return math.sin(2.0 * math.pi * BREATH_RATE_HZ * t + wander + phase0)


def breath_transform(breath: float) -> tuple[float, float]:
    """(vertical offset, vertical scale) of the body for a breathing phase, in canvas
    units: the chest rises and the figure stretches slightly upward on inhale."""
    return BREATH_OFFSET * breath, 1.0 + BREATH_SCALE * breath


def apply(state: AvatarState, t: float, seed: int = 0, *, blinking: bool = True,
          breathing_on: bool = True) -> None:
    """Set ``state``'s blinks (both eyes) and breathing for time ``t``: idle motion is
    one source of the avatar state, as a tracker or the API will be."""
    state.set_blink(blink(t, seed) if blinking else 0.0)
    state.breath = breathing(t, seed) if breathing_on else 0.0
