"""The whole avatar at one instant: what travels through the frame slots to every output.

One typed record for every source of motion: the voice and the microphone set the mouth,
idle motion sets blinks and breathing, the avatar's motion (render/timing/avatar_motion.py)
its bounce, squash, tilt, shake and sway, the expression fader (pipeline/core/expressions.py)
its expression weights, and a face tracker or the API (later) eyes, brows and head the same
way. Rigs draw what they support of it through the presenter's AvatarFrame; the rest is
carried, so an output or app that can show it (VMC, VTube Studio) gets it frame-exact.

The record is a fixed float64 vector with named fields, so it is preallocated once and
copied in place: a slot holds a row of a 2-D array, and writing or reading a frame copies
a row, allocating nothing.
"""

from __future__ import annotations

import numpy as np

from pipeline.core.frames import MouthPose

# Expression weights, 0..1: VRM's preset expressions, as VMC and VTube Studio name them.
EXPRESSIONS = ("happy", "angry", "sad", "relaxed", "surprised")

# Field → index in the vector. Units: visemes are indices into OVR_VISEMES (stored exactly
# as floats), mix and openness 0..1 (MouthPose's meaning), blinks 0 open .. 1 shut, brows
# -1 lowered .. 1 raised, head angles in radians (yaw left-positive, pitch up-positive,
# roll counter-clockwise-positive, about the bottom centre of the canvas on a sprite rig),
# offset in canvas units (x a fraction of the canvas's width, right; y of its height, up),
# breath -1..1, squash a fraction (0 none, 0.05: 5 % shorter and 5 % wider, pivot at the
# bottom centre; negative stretches), hidden 0 shown .. 1 gone (the show/hide hotkey: the
# outputs draw the avatar at 1 - hidden opacity over their background).
FIELDS = ("viseme_a", "viseme_b", "mix", "openness", "blink_left", "blink_right",
          "brow_left", "brow_right", "yaw", "pitch", "roll", "offset_x", "offset_y",
          "breath", "squash", "hidden", *(f"expression_{name}" for name in EXPRESSIONS))
INDEX = {name: i for i, name in enumerate(FIELDS)}
SIZE = len(FIELDS)
_EXPRESSIONS = slice(INDEX[f"expression_{EXPRESSIONS[0]}"], SIZE)


class AvatarState:
    """A view of one row of floats with a property per field.

    ``values`` is the row: a state of its own (``AvatarState()``) or a row of a slot
    array (``AvatarState(array[k])``) — writing a property writes that row.
    """

    __slots__ = ("values",)

    def __init__(self, values: np.ndarray | None = None) -> None:
        self.values = np.zeros(SIZE, np.float64) if values is None else values

    def clear(self) -> None:
        """The avatar at rest: silent mouth, eyes open, head straight, no expression."""
        self.values.fill(0.0)

    # -- the mouth -----------------------------------------------------------------

    def set_mouth(self, pose: MouthPose) -> None:
        v = self.values
        v[0], v[1], v[2], v[3] = pose.viseme_a, pose.viseme_b, pose.mix, pose.openness

    def mouth_pose(self) -> MouthPose:
        v = self.values
        return MouthPose(int(v[0]), int(v[1]), float(v[2]), float(v[3]))

    # -- the rest ------------------------------------------------------------------

    def set_blink(self, left: float, right: float | None = None) -> None:
        """Eyelid closure per eye (both alike when ``right`` is None)."""
        self.values[INDEX["blink_left"]] = left
        self.values[INDEX["blink_right"]] = left if right is None else right

    @property
    def eyes_closed(self) -> float:
        """For a rig that draws both eyes as one: as closed as the more closed eye."""
        v = self.values
        return float(max(v[INDEX["blink_left"]], v[INDEX["blink_right"]]))

    @property
    def breath(self) -> float:
        return float(self.values[INDEX["breath"]])

    @breath.setter
    def breath(self, value: float) -> None:
        self.values[INDEX["breath"]] = value

    @property
    def openness(self) -> float:
        return float(self.values[INDEX["openness"]])

    def set_placement(self, offset_x: float, offset_y: float, roll: float, squash: float) -> None:
        """The whole avatar's move: offset, roll (radians) and squash (FIELDS' units)."""
        v = self.values
        v[INDEX["offset_x"]], v[INDEX["offset_y"]] = offset_x, offset_y
        v[INDEX["roll"]], v[INDEX["squash"]] = roll, squash

    @property
    def hidden(self) -> float:
        return float(self.values[INDEX["hidden"]])

    @hidden.setter
    def hidden(self, value: float) -> None:
        self.values[INDEX["hidden"]] = value

    def set_head_turn(self, yaw: float, pitch: float) -> None:
        """The head's turn and nod (radians, FIELDS' signs)."""
        self.values[INDEX["yaw"]], self.values[INDEX["pitch"]] = yaw, pitch

    def placement(self) -> tuple[float, float, float, float]:
        """(offset_x, offset_y, roll, squash), as set_placement takes them."""
        v = self.values
        return (float(v[INDEX["offset_x"]]), float(v[INDEX["offset_y"]]),
                float(v[INDEX["roll"]]), float(v[INDEX["squash"]]))

    @property
    def expressions(self) -> np.ndarray:
        """The expression weights in EXPRESSIONS order (a view: writable)."""
        return self.values[_EXPRESSIONS]


def blend_into(out: AvatarState, a: AvatarState, b: AvatarState, t: float) -> None:
    """``out`` (neither ``a`` nor ``b``) = the state ``t`` of the way from ``a`` to ``b``
    (0..1), in place: every continuous field blended; the mouth as MouthPose's midway
    rule does it — the same viseme pair blends its mix, different pairs cross-fade from
    a's shown viseme to b's."""
    va, vb, v = a.values, b.values, out.values
    np.subtract(vb, va, out=v)
    np.multiply(v, t, out=v)
    np.add(v, va, out=v)
    if va[0] == vb[0] and va[1] == vb[1]:
        v[0], v[1] = va[0], va[1]
    else:
        v[0] = va[1] if va[2] >= 0.5 else va[0]
        v[1] = vb[1] if vb[2] >= 0.5 else vb[0]
        v[2] = t


def still_state(pose: MouthPose, blink: float, breath: float,
                out: AvatarState | None = None) -> AvatarState:
    """A neutral, unmoved avatar at this mouth, blink (both eyes) and breathing phase,
    in `out` (cleared first) or a new state: what a renderer draws for callers that give
    it only those three."""
    state = AvatarState() if out is None else out
    state.clear()
    state.set_mouth(pose)
    state.set_blink(blink)
    state.breath = breath
    return state
