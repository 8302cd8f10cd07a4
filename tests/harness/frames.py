"""What a frame slot holds, as the tests look at it: the mouth of the frame."""

from pipeline.core.avatar_state import AvatarState
from pipeline.core.frames import MouthPose
from render.timing.frame_slots import FrameSlots


def taken_pose(slots: FrameSlots, frame_index: int) -> MouthPose | None:
    """The mouth of frame `frame_index` as FrameSlots.take_state finds it, or None."""
    state = AvatarState()
    return state.mouth_pose() if slots.take_state(frame_index, state) else None
