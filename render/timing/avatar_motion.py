"""The avatar's motion and expression on the frame path: a bounce and stretch while
speaking, a tilt with emphasis, a shake on loud sound, a gentle idle sway (the PNGtuber
conventions), the head's look about and nod (for rigs that can turn a head), and the
expression chosen by the studio, cross-faded.

Motion is a pure function of the frame's own mouth openness and media time, computed
where the mouth is (the producer's motion step, after the pose is set), so it is
frame-exact with the sound: no timer, no state carried from frame to frame. It is written
into the avatar state's offset, roll, squash, yaw and pitch, which every rig and pose
output reads (the sprite renderer draws the first three as a transform of the whole
avatar about its bottom centre; the photo renderer turns the head).

One AvatarMotion is shared by every presenter, so all outputs show the same expression
and motion at the same media time; the studio's thread sets it, the producers' threads
read it (each setting is one attribute swapped whole).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.core.avatar_state import AvatarState
from pipeline.core.expressions import NEUTRAL, ExpressionFader, check_expression
from render.timing.idle_motion import hash01

# Sizes at strength 1, chosen by eye on the bundled 512-px avatar shown at 512 px: a
# 13-px hop on a wide-open vowel reads as a bounce without the chin leaving the mouth
# region's place on screen for longer than the vowel; 6° of lean is what PNGtuber rigs
# tilt on emphasis; a 4-px shake at 11 Hz reads as trembling, not as a blurred frame.
BOUNCE_HEIGHT = 0.025       # of the canvas height, at openness 1
BOUNCE_STRETCH = 0.03       # the figure 3 % taller and narrower at the top of a hop
TILT_RADIANS = math.radians(6.0)
TILT_LEAN_HZ = 0.21         # the lean's side wanders over a few seconds (phrases)
SHAKE_WIDTH = 0.008         # of the canvas width
SHAKE_HZ = 11.0
SHAKE_THRESHOLD = 0.7       # openness above which the sound counts as loud
# Sway is felt more than seen: 1.5° about the bottom centre, a 7-s period.
SWAY_RADIANS = math.radians(1.5)
SWAY_WIDTH = 0.004
SWAY_HZ = 0.14
# The head's turn and nod, for rigs that draw them (photo rigs; a flat drawing cannot
# turn): with the sway a slow look about of ±4° and ±2°, two frequencies apart so it
# never repeats; with the tilt a nod of 3° down on emphasis. Small beside the photo
# warp's limits, and scaled by settings.motion_head_turn (MotionStrengths.head_turn).
HEAD_YAW_RADIANS = math.radians(4.0)
HEAD_PITCH_RADIANS = math.radians(2.0)
HEAD_HZ = (0.053, 0.087)
NOD_RADIANS = math.radians(3.0)


@dataclass(frozen=True, slots=True)
class MotionStrengths:
    """Each motion's strength, 0 (off) .. 1 (the sizes above): settings.motion_*."""

    bounce: float = 0.0
    tilt: float = 0.0
    shake: float = 0.0
    sway: float = 0.0
    # The head's turn and nod (rigs that draw them: photo rigs), over what sway and tilt
    # make of them: settings.motion_head_turn.
    head_turn: float = 1.0


def placement(openness: float, t: float, strengths: MotionStrengths, seed: int = 0
              ) -> tuple[float, float, float, float]:
    """(offset_x, offset_y, roll, squash) of the whole avatar, in AvatarState's units, for
    a frame of mouth openness `openness` (0..1) at media time t. All strengths 0 give
    exactly (0, 0, 0, 0)."""
    offset_x = offset_y = roll = squash = 0.0
    if strengths.bounce:
        offset_y = strengths.bounce * BOUNCE_HEIGHT * openness
        squash = -strengths.bounce * BOUNCE_STRETCH * openness
    if strengths.tilt:
        lean = math.sin(2.0 * math.pi * (TILT_LEAN_HZ * t + hash01(seed, 0, 5)))
        roll += strengths.tilt * TILT_RADIANS * openness * openness * lean
    if strengths.shake and openness > SHAKE_THRESHOLD:
        loud = (openness - SHAKE_THRESHOLD) / (1.0 - SHAKE_THRESHOLD)
        offset_x += strengths.shake * SHAKE_WIDTH * loud * math.sin(2.0 * math.pi * SHAKE_HZ * t)
    if strengths.sway:
        phase = 2.0 * math.pi * (SWAY_HZ * t + hash01(seed, 0, 6))
        roll += strengths.sway * SWAY_RADIANS * math.sin(phase)
        offset_x += strengths.sway * SWAY_WIDTH * math.sin(phase + 0.5 * math.pi)
    return offset_x, offset_y, roll, squash


def head_turn(openness: float, t: float, strengths: MotionStrengths, seed: int = 0
              ) -> tuple[float, float]:
    """(yaw, pitch) of the head in radians (AvatarState's signs) for a frame of mouth
    openness `openness` at media time t: the sway's look about and the tilt's nod. All
    strengths 0 give exactly (0, 0)."""
    yaw = pitch = 0.0
    if strengths.sway:
        slow, slower = HEAD_HZ
        yaw = strengths.sway * HEAD_YAW_RADIANS * 0.5 * (
            math.sin(2.0 * math.pi * (slow * t + hash01(seed, 0, 7)))
            + math.sin(2.0 * math.pi * (slower * t + hash01(seed, 0, 8))))
        pitch = strengths.sway * HEAD_PITCH_RADIANS * math.sin(
            2.0 * math.pi * (slower * t + hash01(seed, 0, 9)))
    if strengths.tilt:
        pitch -= strengths.tilt * NOD_RADIANS * openness * openness
    return yaw, pitch


# Showing or hiding the avatar fades it over this long: a cut reads as a glitch on stream,
# and a quarter second is what a streamer's "be right back" takes in OBS's own fade.
HIDE_FADE_S = 0.25


class AvatarMotion:
    """The studio's one handle on motion and expression, shared by every presenter.

    `media_now()` is the media time now (the engine's clock read at the monotonic now);
    choices take effect from then. `version` changes with every choice, so producers make
    the frames they made ahead again (a frame never shows a choice undone)."""

    def __init__(self, media_now: Callable[[], float] = time.monotonic, *,
                 strengths: MotionStrengths = MotionStrengths(), fade_seconds: float = 0.15,
                 seed: int = 0) -> None:
        self.media_now = media_now
        self.strengths = strengths
        self.seed = seed
        self.fader = ExpressionFader(fade_seconds)
        self.offered: tuple[str, ...] = ()
        self.version = 0
        # (media time the fade starts, hidden then, hidden at its end): swapped whole, so
        # a presenter's thread reads one fade or the next, never half of one.
        self._hide: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def set_offered(self, expressions: tuple[str, ...]) -> str | None:
        """The expressions the avatar shown now draws (a new rig: its own). Where it lacks
        the one chosen, the avatar fades to neutral, and the message for the user says so."""
        self.offered = tuple(expressions)
        chosen = self.fader.chosen
        if chosen == NEUTRAL or chosen in self.offered:
            return None
        self.fader.set_target(NEUTRAL, self.media_now())
        self.version += 1
        return f"This avatar has no expression {chosen!r}, so it shows neutral."

    def set_expression(self, name: str) -> None:
        """Fade to `name` from now. ExpressionError (its message lists the avatar's
        expressions) when the avatar has none of that name."""
        self.fader.set_target(check_expression(name, self.offered), self.media_now())
        self.version += 1

    def set_strengths(self, strengths: MotionStrengths) -> None:
        """New strengths, live (from the frames made next)."""
        self.strengths = strengths
        self.version += 1

    @property
    def hidden(self) -> bool:
        """Whether the avatar is (being) hidden: the last set_hidden's choice."""
        return self._hide[2] == 1.0

    def set_hidden(self, hidden: bool) -> None:
        """Fade the avatar out (or back in) over HIDE_FADE_S from now, in every output."""
        t = self.media_now()
        self._hide = (t, self._hidden_at(t), 1.0 if hidden else 0.0)
        self.version += 1

    def _hidden_at(self, t: float) -> float:
        start, was, to = self._hide
        return to + (was - to) * (1.0 - min(max((t - start) / HIDE_FADE_S, 0.0), 1.0))

    def set_fade(self, seconds: float) -> None:
        """The cross-fade's length for the choices made from now (expression_fade_ms)."""
        self.fader.fade_seconds = seconds

    def apply(self, state: AvatarState, t: float) -> None:
        """Write the placement and expression weights of the frame at media time t into
        `state`, whose mouth is set already."""
        openness, strengths = state.openness, self.strengths
        state.set_placement(*placement(openness, t, strengths, self.seed))
        yaw, pitch = head_turn(openness, t, strengths, self.seed)
        state.set_head_turn(yaw * strengths.head_turn, pitch * strengths.head_turn)
        self.fader.weights_into(state.expressions, t)
        state.hidden = self._hidden_at(t)
