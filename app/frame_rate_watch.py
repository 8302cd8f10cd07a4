"""Tells when the avatar's frames fall short of what was asked, and when they are back:
drawn slower than the frame rate asked for (FrameRateWatch), or made on the frame
producer's cheaper path because a frame took longer than two ticks to make
(DegradedWatch: render/timing/frame_producer.py's degraded mode).

A frame rate that sinks under load (30-48 fps for 60 measured on the 2-core VM while
the voice synthesised and OBS captured) made the mouth step visibly with no word said.
Pure: fed (time, measured fps or overruns) by its owner's timer, so it is tested without
a window.
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


DEGRADED_MESSAGE = ("The avatar's frames take too long to make (one took over two frames' "
                    "time): the mouth is shown without its cross-fades until they keep up "
                    "again. Close other programs, or lower the frame rate in Settings.")


@dataclass
class DegradedWatch:
    """`update(now, overruns)`, with the producers' count of frames that took over two
    ticks, answers DEGRADED_MESSAGE at the first, "" once HOLD_S have passed without
    another, or None for no change. A producer tries its full path again a second after
    each overrun (degraded_hold), and a stage still slow overruns again then: while it
    stays slow the message stays, said once. A count that goes down (the outputs were
    reopened, with new producers) is a new start."""

    overruns: int = 0
    last_overrun: float = 0.0
    degraded: bool = False

    def update(self, now: float, overruns: int) -> str | None:
        more = overruns > self.overruns
        self.overruns = overruns
        if more:
            self.last_overrun = now
            if not self.degraded:
                self.degraded = True
                return DEGRADED_MESSAGE
            return None
        if self.degraded and now - self.last_overrun >= HOLD_S:
            self.degraded = False
            return ""
        return None
