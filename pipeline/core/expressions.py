"""Expressions chosen at run time, cross-faded: the avatar state's expression weights as a
pure function of media time.

A change of expression is a fade from one expression to another ("neutral" is all
weights 0). At any instant at most two expressions (neutral included) have weight, so a
sprite rig draws every frame of a fade from two drawings of each layer, and the weights
sum to 1 with neutral's share. A new choice during a fade keeps the weights continuous:
back to where the fade came from reverses it from where it is; a third expression waits
for the heavier side to take over (at most half a fade), then fades from it.

Pure, so every frame can be made for its own media time in any order (the producer makes
frames ahead, again after a change, the export at exact times): the fader is the list of
fades, each taking over at a media time; `weights_into(out, t)` reads the one in force at
t. The list is one tuple swapped whole, so the studio's thread sets while the producer's
thread reads, without a lock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.core.avatar_state import EXPRESSIONS
from pipeline.core.easing import smoothstep

NEUTRAL = "neutral"


class ExpressionError(ValueError):
    """An expression the avatar does not have; the message is for the user."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def check_expression(name: str, offered: tuple[str, ...]) -> str:
    """`name` if the avatar offers it ("neutral" always), else ExpressionError listing
    what it offers."""
    if name == NEUTRAL or name in offered:
        return name
    listed = ", ".join((NEUTRAL, *offered))
    raise ExpressionError(f"This avatar has no expression {name!r}; its expressions are: {listed}.")


@dataclass(frozen=True, slots=True)
class Fade:
    """From `source` to `target` (expression names) over `duration` seconds from media
    time `start`, in force from media time `takes_over` (≥ start when a reversed fade
    continues one already under way) until the next fade's."""

    takes_over: float
    start: float
    source: str
    target: str
    duration: float

    def progress(self, t: float) -> float:
        """Linear 0..1 at media time t (1 for a fade of no length)."""
        if self.duration <= 0.0:
            return 1.0
        x = (t - self.start) / self.duration
        return x if 0.0 < x < 1.0 else (1.0 if x >= 1.0 else 0.0)


_AT_REST = Fade(-np.inf, -np.inf, NEUTRAL, NEUTRAL, 0.0)
_INDEX = {name: i for i, name in enumerate(EXPRESSIONS)}


class ExpressionFader:
    """Expression weights over media time (invariant: at most two expressions, neutral
    included, weigh anything at any t, and their weights sum to 1)."""

    def __init__(self, fade_seconds: float = 0.15) -> None:
        self.fade_seconds = fade_seconds
        self._fades: tuple[Fade, ...] = (_AT_REST,)

    def _in_force(self, t: float) -> Fade:
        fades = self._fades
        for fade in reversed(fades):
            if fade.takes_over <= t:
                return fade
        return fades[0]

    @property
    def chosen(self) -> str:
        """The expression chosen last (what the fades lead to)."""
        return self._fades[-1].target

    def set_target(self, name: str, t: float) -> None:
        """Fade to expression `name` (one of EXPRESSIONS or "neutral") from media time t.
        Fades planned after t by an earlier call are replaced."""
        if name != NEUTRAL and name not in _INDEX:
            raise ValueError(f"unknown expression {name!r}")
        current = self._in_force(t)
        s = current.progress(t)
        kept = tuple(f for f in self._fades if f.takes_over <= t)
        duration = self.fade_seconds
        if name == current.target:
            planned: tuple[Fade, ...] = ()
        elif s >= 1.0:
            planned = (Fade(t, t, current.target, name, duration),)
        elif name == current.source:
            # smoothstep(1 - x) = 1 - smoothstep(x): reversed at 1 - s, the weights go on
            # from where they are.
            planned = (Fade(t, t - (1.0 - s) * current.duration, current.target, name,
                            current.duration),)
        elif s >= 0.5:
            end = current.start + current.duration
            planned = (Fade(end, end, current.target, name, duration),)
        else:
            back = Fade(t, t - (1.0 - s) * current.duration, current.target, current.source,
                        current.duration)
            end = back.start + back.duration
            planned = (back, Fade(end, end, current.source, name, duration))
        self._fades = (*kept[-2:], *planned)

    def weights_into(self, out: np.ndarray, t: float) -> None:
        """Write the weights at media time t into `out` (EXPRESSIONS order)."""
        fade = self._in_force(t)
        w = smoothstep(fade.progress(t))
        out.fill(0.0)
        if fade.source != NEUTRAL:
            out[_INDEX[fade.source]] += 1.0 - w
        if fade.target != NEUTRAL:
            out[_INDEX[fade.target]] += w


def expression_pair(weights: np.ndarray) -> tuple[str, str, float]:
    """(a, b, s): the state's expression as a cross-fade of two, `s` the weight of `b`,
    for a rig that draws two drawings of a layer at once. The two heaviest of neutral
    (1 − the weights' sum) and EXPRESSIONS, in that order; s renormalised, so the
    fader's states are drawn exactly and a blend of more (two frames' interpolation
    across a chained fade) loses only its lightest share."""
    neutral = max(0.0, 1.0 - float(weights.sum()))
    ranked = sorted(((neutral, 0), *((float(w), i + 1) for i, w in enumerate(weights))),
                    key=lambda item: -item[0])
    (wa, ia), (wb, ib) = sorted(ranked[:2], key=lambda item: item[1])
    names = (NEUTRAL, *EXPRESSIONS)
    if wb <= 0.0:
        return names[ia], names[ia], 0.0
    if wa <= 0.0:
        return names[ib], names[ib], 0.0
    return names[ia], names[ib], wb / (wa + wb)
