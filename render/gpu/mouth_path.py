"""Which path makes the avatar's mouth frames: OpenGL's shaders, or CUDA kernels handed
to GL through CUDA-GL interop (render/gpu/). Pure: given what the settings ask, why CUDA
cannot be used (if it cannot) and both paths' times on the rig, it says which path and
why, in one line for the status.

The paths are compared by P99, not P50: a display shows a frame only if it is done by
its tick, so the slow frames are the ones a viewer sees (held or late frames), and the
faster path in the middle can be the slower one there. On the H200 CUDA's photo mouth
frame had the lower P99 at 1024 px and GL's the lower P50; the sprite frame GL's both
(docs/gpu.md), so neither path wins for every rig.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

OPENGL, CUDA = "opengl", "cuda"
AUTO = "auto"
# The setting's values (app/settings.py mouth_frames).
MOUTH_FRAMES = (AUTO, OPENGL, CUDA)
NAMES = {OPENGL: "OpenGL", CUDA: "CUDA"}
# A measurement holds for output sizes within this factor of pixel area of its own. The
# GL path's GPU work grows with the pixels drawn (0.033 ms a sprite frame at 512², 0.131
# ms at 1024²: 4.0× for 4× the pixels, bench/results/gpu_h200.json) while CUDA's interop
# costs a fixed map, unmap and blit per frame, so the two can trade places as the size
# moves; a window dragged a little does not make a new measurement.
AREA_FACTOR = 2.0


@dataclass(frozen=True, slots=True)
class PathTime:
    """One path's frame times, from the call to the frame done on the GPU."""

    p50_ms: float
    p99_ms: float

    @classmethod
    def of(cls, milliseconds: Sequence[float]) -> PathTime:
        p50, p99 = np.percentile(milliseconds, (50, 99))
        return cls(float(p50), float(p99))


@dataclass(frozen=True, slots=True)
class PathTimes:
    """Both paths timed on one rig at one output size (pixels), `frames` frames each."""

    size: tuple[int, int]
    opengl: PathTime
    cuda: PathTime
    frames: int


@dataclass(frozen=True, slots=True)
class MouthPath:
    """The path chosen (OPENGL or CUDA) and why, as the status says it ("CUDA: 0.41 ms
    P99 against OpenGL's 0.71 ms for this rig at 1024 px"); `warning` where it is not
    what the settings asked for, or CUDA failed: the user is told, never left to guess."""

    path: str
    reason: str
    warning: bool = False


def checked(setting: str) -> str:
    """`setting`, or ValueError where it is not one of MOUTH_FRAMES."""
    if setting not in MOUTH_FRAMES:
        raise ValueError(f"mouth frames {setting!r}: use one of {', '.join(MOUTH_FRAMES)}")
    return setting


def needs_times(setting: str, unavailable: str | None) -> bool:
    """Whether choose() needs both paths timed: only "auto" where CUDA can run."""
    return setting == AUTO and unavailable is None


def choose(setting: str, unavailable: str | None, times: PathTimes | None = None,
           failed: str | None = None) -> MouthPath:
    """The path for `setting` (MOUTH_FRAMES). `unavailable`: why CUDA-GL interop cannot
    be used here (render/gpu/interop.py cuda_unavailable()), None where it can; `failed`:
    what went wrong where CUDA was tried and failed (a CudaError's message); `times`:
    both paths on the rig, needed where needs_times() says so."""
    if checked(setting) == OPENGL:
        return MouthPath(OPENGL, "OpenGL, as the settings ask")
    if failed is not None:
        return MouthPath(OPENGL, f"OpenGL: CUDA-GL interop failed here: {failed}", warning=True)
    if unavailable is not None:
        if setting == CUDA:
            return MouthPath(OPENGL, "OpenGL: the settings ask for CUDA, but CUDA-GL interop "
                                     f"is not available here: {unavailable}", warning=True)
        # "auto" settling for the path every GPU has is no warning.
        return MouthPath(OPENGL, f"OpenGL: CUDA-GL interop is not available here: {unavailable}")
    if setting == CUDA:
        return MouthPath(CUDA, "CUDA, as the settings ask")
    if times is None:
        raise ValueError("choosing between the paths needs both timed (needs_times)")
    # A tie goes to OpenGL: the same frames without the interop's moving parts.
    path, other = (CUDA, OPENGL) if times.cuda.p99_ms < times.opengl.p99_ms else (OPENGL, CUDA)
    won, lost = getattr(times, path), getattr(times, other)
    return MouthPath(path, f"{NAMES[path]}: {won.p99_ms:.2f} ms P99 against {NAMES[other]}'s "
                           f"{lost.p99_ms:.2f} ms for this rig at {size_text(times.size)}")


def size_moved(measured: tuple[int, int], size: tuple[int, int]) -> bool:
    """Whether an output now `size` has moved too far from the size its paths were
    `measured` at for that measurement to hold (AREA_FACTOR)."""
    before, now = measured[0] * measured[1], size[0] * size[1]
    return max(before, now) > AREA_FACTOR * max(1, min(before, now))


def size_text(size: tuple[int, int]) -> str:
    """"1024 px" for a square, else "1280×720 px"."""
    w, h = size
    return f"{w} px" if w == h else f"{w}×{h} px"
