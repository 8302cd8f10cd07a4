"""The expression fader: weights over media time, as pure functions of the choices made."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pipeline.core.avatar_state import EXPRESSIONS
from pipeline.core.easing import smoothstep
from pipeline.core.expressions import (
    NEUTRAL,
    ExpressionError,
    ExpressionFader,
    check_expression,
    expression_pair,
)

FADE = 0.15
HAPPY, SAD, ANGRY = (EXPRESSIONS.index(n) for n in ("happy", "sad", "angry"))


def weights(fader: ExpressionFader, t: float) -> np.ndarray:
    out = np.full(len(EXPRESSIONS), np.nan)
    fader.weights_into(out, t)
    return out


def test_neutral_until_a_choice_then_a_smooth_fade_of_the_set_length():
    fader = ExpressionFader(FADE)
    assert not weights(fader, -1e9).any() and not weights(fader, 5.0).any()
    fader.set_target("happy", 10.0)
    assert not weights(fader, 9.999).any()
    for x in (0.0, 0.25, 0.5, 0.75, 1.0):
        w = weights(fader, 10.0 + x * FADE)
        assert w[HAPPY] == pytest.approx(smoothstep(x)) and w.sum() == pytest.approx(w[HAPPY])
    assert weights(fader, 60.0)[HAPPY] == 1.0
    fader.set_target(NEUTRAL, 20.0)
    assert weights(fader, 20.0 + FADE / 2)[HAPPY] == pytest.approx(0.5)
    assert not weights(fader, 20.0 + FADE).any()
    # The past is kept: a frame made again for an earlier time shows what it showed.
    assert weights(fader, 10.0 + FADE / 2)[HAPPY] == pytest.approx(0.5)


def test_one_expression_to_another_cross_fades_their_weights():
    fader = ExpressionFader(FADE)
    fader.set_target("happy", 0.0)
    fader.set_target("sad", 1.0)
    w = weights(fader, 1.0 + 0.3 * FADE)
    assert w[SAD] == pytest.approx(smoothstep(0.3)) and w[HAPPY] == pytest.approx(1 - smoothstep(0.3))


def test_choosing_back_during_a_fade_reverses_it_from_where_it_is():
    fader = ExpressionFader(FADE)
    fader.set_target("happy", 0.0)
    before = weights(fader, 0.04)[HAPPY]
    fader.set_target(NEUTRAL, 0.04)
    assert weights(fader, 0.04)[HAPPY] == pytest.approx(before)
    # Back to neutral in the time it had taken to get there, not a whole fade.
    assert not weights(fader, 0.08 + 1e-9).any()


@pytest.mark.parametrize("at", [0.03, 0.12])
def test_a_third_expression_during_a_fade_waits_for_the_heavier_side(at):
    fader = ExpressionFader(FADE)
    fader.set_target("happy", 0.0)
    fader.set_target("angry", at)
    times = np.linspace(at, at + 2 * FADE, 400)
    rows = np.array([weights(fader, t) for t in times])
    assert np.abs(np.diff(rows, axis=0)).max() < 0.02      # continuous at 400 steps a 0.3 s
    assert (np.count_nonzero(rows, axis=1) <= 2).all()     # two at most (neutral may be one)
    heavier_done = FADE if at >= FADE / 2 else 2 * at      # happy full, or back to neutral
    assert rows[-1][ANGRY] == 1.0
    assert weights(fader, heavier_done + FADE + 1e-9)[ANGRY] == 1.0


def test_any_choices_keep_two_weights_at_most_summing_to_one_at_most():
    rng = random.Random(5)
    fader = ExpressionFader(FADE)
    t, choices = 0.0, (NEUTRAL, *EXPRESSIONS)
    for _ in range(300):
        t += rng.uniform(0.0, 0.2)
        fader.set_target(rng.choice(choices), t)
        for dt in (0.0, 0.01, 0.05, 0.1):
            w = weights(fader, t + dt)
            assert np.count_nonzero(w) <= 2 and w.sum() <= 1.0 + 1e-12 and (w >= 0).all()
            a, b, s = expression_pair(w)
            # The pair a sprite rig draws is those weights exactly.
            assert 0.0 <= s <= 1.0 and (a == b) == (s == 0.0 or np.count_nonzero(w) == 0)


def test_no_fade_switches_at_once():
    fader = ExpressionFader(0.0)
    fader.set_target("sad", 3.0)
    assert weights(fader, 3.0)[SAD] == 1.0 and not weights(fader, 2.999).any()


def test_the_pair_drawn_for_weights():
    w = np.zeros(len(EXPRESSIONS))
    assert expression_pair(w) == (NEUTRAL, NEUTRAL, 0.0)
    w[HAPPY] = 0.25
    assert expression_pair(w) == (NEUTRAL, "happy", 0.25)
    w[HAPPY] = 1.0
    assert expression_pair(w) == ("happy", "happy", 0.0)
    w[HAPPY], w[SAD] = 0.7, 0.3
    assert expression_pair(w) == ("happy", "sad", pytest.approx(0.3))


def test_an_expression_the_avatar_lacks_is_refused_with_its_list():
    assert check_expression("happy", ("happy", "sad")) == "happy"
    assert check_expression(NEUTRAL, ()) == NEUTRAL
    with pytest.raises(ExpressionError) as caught:
        check_expression("smug", ("happy", "sad"))
    assert caught.value.message == ("This avatar has no expression 'smug'; its expressions are: "
                                    "neutral, happy, sad.")


def test_a_new_avatar_without_the_chosen_expression_fades_to_neutral_saying_so():
    from render.timing.avatar_motion import AvatarMotion

    now = [0.0]
    motion = AvatarMotion(lambda: now[0], fade_seconds=FADE)
    assert motion.set_offered(("happy", "sad")) is None
    motion.set_expression("sad")
    now[0] = 1.0
    assert motion.set_offered(("sad",)) is None
    version = motion.version
    assert motion.set_offered(("happy",)) == "This avatar has no expression 'sad', so it shows neutral."
    assert motion.version > version and motion.fader.chosen == NEUTRAL
    assert not weights(motion.fader, 1.0 + FADE).any()
