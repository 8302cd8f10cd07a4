"""Which path each output makes its mouth frames on (render/gpu/mouth_path.py), and the
renderer of that path for it.

One picker per app, shared by its outputs (the main window's view, the avatar window,
the frame feeds of the browser source and the virtual camera; the video export has its
own). Where the settings say "auto" and CUDA-GL interop works, both paths are timed on
the rig (render/gpu/path_timing.py) in the output's own GL context when the output is
given the rig, before it presents a frame of it, and again when its size moves by more
than mouth_path.AREA_FACTOR; a rig timed at a size is timed once for every output near
that size. A CUDA renderer that fails (CudaError) is replaced by OpenGL's, and the
failure is kept and said: every output of that kind of rig then draws with OpenGL.

`on_change()` is called when what summary() says changes: the app shows it in its
status line, and warnings() as messages.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from render.gpu import interop
from render.gpu.interop import CudaError
from render.gpu.mouth_path import (
    AUTO,
    CUDA,
    OPENGL,
    MouthPath,
    PathTimes,
    checked,
    choose,
    needs_times,
    size_moved,
    size_text,
)
from render.gpu.path_timing import measure_paths
from render.rigs.loader import (
    AvatarRenderer,
    AvatarRig,
    kind_of,
    renderer_made,
    renderer_showing,
    renderer_type,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Chosen:
    size: tuple[int, int]
    path: MouthPath


class MouthPathPicker:
    """`setting`: what the settings ask (mouth_path.MOUTH_FRAMES); OpenGL by default, for
    whoever draws without the app's settings (tests, benchmarks). Every method runs on
    the thread of the GL contexts, each with its output's context current."""

    def __init__(self, setting: str = OPENGL, on_change: Callable[[], None] | None = None) -> None:
        self.setting = checked(setting)
        self.on_change = on_change
        self._rig: AvatarRig | None = None
        self._times: list[PathTimes] = []  # of _rig
        self._failed: dict[str, str] = {}  # why CUDA failed, by kind of rig
        self._chosen: dict[int, _Chosen] = {}  # by output (its id)

    # -- for the outputs ---------------------------------------------------------------

    def show(self, renderer: AvatarRenderer, rig: AvatarRig, size: tuple[int, int],
             owner: object) -> AvatarRenderer:
        """`renderer` showing `rig`, or the renderer of the path chosen for `rig` at
        `size` (pixels) in its place (loader.renderer_showing), for output `owner`."""
        return self._on_path(rig, size, owner, lambda path: renderer_showing(renderer, rig, path))

    def made(self, rig: AvatarRig, clear_color: tuple[float, float, float, float],
             size: tuple[int, int], owner: object) -> AvatarRenderer:
        """A new renderer (loader.renderer_made) of the path chosen for `rig` at `size`."""
        return self._on_path(rig, size, owner,
                             lambda path: renderer_made(rig, clear_color, size, path))

    def resized(self, renderer: AvatarRenderer, rig: AvatarRig, size: tuple[int, int],
                owner: object) -> AvatarRenderer:
        """`renderer`, resized to `size` already, or where the output's size moved too
        far from where its path was chosen (mouth_path.size_moved), the renderer of the
        path chosen anew at this size in its place."""
        chosen = self._chosen.get(id(owner))
        if self.setting != AUTO or chosen is None or not size_moved(chosen.size, size):
            return renderer
        return self._on_path(rig, size, owner, lambda path: (
            renderer if type(renderer) is renderer_type(rig, path)
            else renderer_showing(renderer, rig, path)))

    def forget(self, owner: object) -> None:
        """Output `owner` draws no more (closed, or its GL context gone)."""
        before = self.summary()
        self._chosen.pop(id(owner), None)
        self._changed(before)

    def set_setting(self, setting: str) -> None:
        """What the settings ask from the next show() on: the app shows its rig again in
        each output to apply it."""
        self.setting = checked(setting)

    # -- what it says ------------------------------------------------------------------

    def paths(self) -> list[MouthPath]:
        """The outputs' paths, each different one once, in the order first chosen."""
        return list(dict.fromkeys(chosen.path for chosen in self._chosen.values()))

    def summary(self) -> str | None:
        """The status line's words for the paths in use ("mouth frames by CUDA: 0.41 ms
        P99 against OpenGL's 0.71 ms for this rig at 1024 px"); None while no output
        draws."""
        paths = self.paths()
        return "mouth frames by " + "; by ".join(p.reason for p in paths) if paths else None

    def measured(self, rig: AvatarRig) -> list[PathTimes]:
        """The paths' times kept for `rig`, one for each size timed at."""
        return list(self._times) if rig is self._rig else []

    def warnings(self) -> list[str]:
        """The reasons of the paths in use that are not what the settings asked, or that
        CUDA failed: for messages the user sees."""
        return [p.reason for p in self.paths() if p.warning]

    # -- choosing ----------------------------------------------------------------------

    def choice(self, rig: AvatarRig, size: tuple[int, int]) -> MouthPath:
        """The path for `rig` at `size`, both paths timed first where the choice needs
        it (in the current GL context)."""
        if self.setting == OPENGL:
            return choose(OPENGL, None)
        unavailable = interop.cuda_unavailable()
        kind = kind_of(rig).name
        times = None
        if kind not in self._failed and needs_times(self.setting, unavailable):
            times = self._times_for(rig, size)
        return choose(self.setting, unavailable, times, self._failed.get(kind))

    def _times_for(self, rig: AvatarRig, size: tuple[int, int]) -> PathTimes | None:
        """Both paths' times on `rig` near `size`: kept ones, or timed now. None where
        CUDA failed (kept in _failed)."""
        if rig is not self._rig:
            self._rig, self._times = rig, []
        kept = next((t for t in self._times if not size_moved(t.size, size)), None)
        if kept is not None:
            return kept
        try:
            times = measure_paths(rig, size)
        except CudaError as exc:
            self._fail(rig, exc)
            return None
        log.info("mouth frames of %s at %s, %d frames each: OpenGL %.3f ms P50 / %.3f ms P99, "
                 "CUDA %.3f / %.3f", rig.name, size_text(size), times.frames, times.opengl.p50_ms,
                 times.opengl.p99_ms, times.cuda.p50_ms, times.cuda.p99_ms)
        self._times.append(times)
        return times

    def _on_path(self, rig: AvatarRig, size: tuple[int, int], owner: object,
                 make: Callable[[str], AvatarRenderer]) -> AvatarRenderer:
        """make(path) for the path chosen; where CUDA's renderer fails, OpenGL's, the
        failure kept and said."""
        before = self.summary()
        chosen = self.choice(rig, size)
        try:
            renderer = make(chosen.path)
        except CudaError as exc:
            if chosen.path != CUDA:
                raise
            self._fail(rig, exc)
            chosen = self.choice(rig, size)
            renderer = make(chosen.path)
        self._chosen[id(owner)] = _Chosen(size, chosen)
        self._changed(before)
        return renderer

    def _fail(self, rig: AvatarRig, exc: CudaError) -> None:
        log.warning("CUDA mouth frames failed for %s: %s", rig.name, exc)
        self._failed[kind_of(rig).name] = str(exc)

    def _changed(self, before: str | None) -> None:
        if self.summary() != before and self.on_change is not None:
            self.on_change()

