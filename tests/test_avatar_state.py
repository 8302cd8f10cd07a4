"""The avatar state record: named fields over one preallocated row."""

import numpy as np
import pytest

from pipeline.core.avatar_state import EXPRESSIONS, FIELDS, INDEX, AvatarState, blend_into
from pipeline.core.frames import MouthPose


def test_fields_are_named_once_and_a_row_of_an_array_is_a_state_in_place():
    assert len(set(FIELDS)) == len(FIELDS) and list(INDEX) == list(FIELDS)
    assert [f"expression_{e}" for e in EXPRESSIONS] == list(FIELDS[-len(EXPRESSIONS):])
    rows = np.zeros((3, len(FIELDS)))
    state = AvatarState(rows[1])
    state.set_mouth(MouthPose(3, 9, 0.25, 0.5))
    state.set_blink(0.2, 0.9)
    state.breath = -0.5
    state.expressions[EXPRESSIONS.index("happy")] = 1.0
    assert rows[1, :4].tolist() == [3, 9, 0.25, 0.5] and not rows[0].any() and not rows[2].any()
    assert state.mouth_pose() == MouthPose(3, 9, 0.25, 0.5)
    assert state.eyes_closed == 0.9 and state.breath == -0.5
    assert rows[1, INDEX["expression_happy"]] == 1.0
    state.clear()
    assert not rows.any()


def test_blending_moves_every_continuous_field_and_cross_fades_the_mouth():
    a, b, out = AvatarState(), AvatarState(), AvatarState()
    a.set_mouth(MouthPose(1, 2, 0.8, 0.2))  # shows 2
    b.set_mouth(MouthPose(5, 6, 0.1, 0.6))  # shows 5
    a.set_blink(0.0)
    b.set_blink(1.0, 0.0)
    b.values[INDEX["yaw"]] = 0.4
    blend_into(out, a, b, 0.25)
    assert out.mouth_pose() == MouthPose(2, 5, 0.25, pytest.approx(0.3))
    assert out.values[INDEX["blink_left"]] == 0.25 and out.values[INDEX["blink_right"]] == 0.0
    assert out.values[INDEX["yaw"]] == pytest.approx(0.1)
    assert a.values[INDEX["yaw"]] == 0.0  # its inputs are left alone


def test_placement_and_a_still_state():
    from pipeline.core.avatar_state import still_state

    state = AvatarState()
    state.set_placement(0.01, -0.02, 0.1, 0.05)
    assert state.placement() == (0.01, -0.02, 0.1, 0.05)
    assert state.values[INDEX["squash"]] == 0.05 and state.values[INDEX["roll"]] == 0.1
    still = still_state(MouthPose(4, 5, 0.5, 0.7), 0.3, -0.2, out=state)
    assert still is state and state.placement() == (0.0, 0.0, 0.0, 0.0)
    assert state.mouth_pose() == MouthPose(4, 5, 0.5, 0.7) and state.openness == 0.7
    assert state.eyes_closed == 0.3 and state.breath == -0.2 and not state.expressions.any()
