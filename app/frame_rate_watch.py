"""Tells when the avatar is drawn slower than the frame rate asked for, and when it is back.

A frame rate that sinks under load (30-48 fps for 60 measured on the 2-core VM while
the voice synthesised and OBS captured) made the mouth step visibly with no word said.
Pure: fed (time, measured fps) by its owner's timer, so it is tested without a window.
"""

from __future__ import annotations

from dataclasses import dataclass

# Below this share of the asked rate, a drop is real: the presenter's count over its last
# 120 ticks wobbles by a few percent on an idle machine (57-61 fps for 60 measured).
LOW_SHARE = 0.85
# Back once above this share, so a rate hovering at the line does not flicker the message.
BACK_SHARE = 0.95
# How long a drop (or a recovery) must last before it is said: a voice's first
# sentence or an import costs a second or two of frames that is not worth a message.
HOLD_S = 3.0


@dataclass
class FrameRateWatch:
    """`update(now, fps)` answers the message to show (a str), "" when the drop is over,
    or None for no change. An fps of 0 (nothing drawn: a hidden window) is no drop."""

    target_fps: float
    low_since: float | None = None
    back_since: float | None = None
    dropped: bool = False

    def update(self, now: float, fps: float) -> str | None:
        low = 0 < fps < self.target_fps * LOW_SHARE
        back = fps == 0 or fps >= self.target_fps * BACK_SHARE
        if not self.dropped:
            self.low_since = (self.low_since if self.low_since is not None else now) if low else None
            if self.low_since is not None and now - self.low_since >= HOLD_S:
                self.dropped, self.back_since = True, None
                return (f"The avatar is drawn at {fps:.0f} fps, below the {self.target_fps:.0f} "
                        "fps asked for: this computer is too busy to draw every frame, so the "
                        "mouth moves in larger steps. Close other programs, or lower the frame "
                        "rate in Settings.")
            return None
        self.back_since = (self.back_since if self.back_since is not None else now) if back else None
        if self.back_since is not None and now - self.back_since >= HOLD_S:
            self.dropped, self.low_since = False, None
            return ""
        return None
