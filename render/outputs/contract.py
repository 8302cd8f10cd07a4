"""What every output is to the app: one shape, as obs-studio declares each output with one
`obs_output_info` of callbacks.

An output is opened by the app's table of outputs (app/outputs.py), which knows the
settings; from then on it is fed and paced the same way whatever it is:

- fed: `set_sources` (the engine's mouth source and media clock, again after a device
  change gave new ones), `set_rig` (pixel outputs draw it; pose outputs ignore it),
  `set_idle_motion`;
- paced: by itself, pulling frames on its own ticks from the one media clock (a
  Presenter of its own: a window's vsync, a feed's timer, a pose ticker's thread);
- reporting: `status()`, one OutputStatus, whatever it is;
- closed: `close()`, once, freeing its threads, sockets and GL objects.

Opening raises OutputError with one line for the user when the output cannot run (a
port in use, no virtual camera device); an output that runs but has trouble later (a
peer app not answering) says so in its status and recovers by itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from render.timing.frame_producer import MediaClock, PoseSource


class OutputError(RuntimeError):
    """An output cannot be opened; the message is one line for the user."""


@dataclass(frozen=True, slots=True)
class OutputStatus:
    """`state`: "on" (running as asked), "waiting" (running, its peer not there yet: an
    app not started, a page not connected) or "trouble" (running, failing: `problem`
    says why in plain words). `detail` is one line for the window (where it goes, what
    it sends); `figures` are its counters for the API's status and the benchmarks."""

    name: str
    state: str
    detail: str
    problem: str | None = None
    figures: dict = field(default_factory=dict)


class Output(Protocol):
    name: str

    def set_sources(self, pose_source: PoseSource | None, media_time_at: MediaClock | None,
                    source_version: Callable[[], int] | None = None) -> None: ...

    def set_rig(self, rig) -> None: ...

    def set_idle_motion(self, blinking: bool = True, breathing: bool = True) -> None: ...

    def set_avatar_motion(self, motion) -> None:
        """The studio's one AvatarMotion (render/timing/avatar_motion.py): expressions
        and motion, written into every frame's state at its own media time."""

    def status(self) -> OutputStatus: ...

    def close(self) -> None: ...
