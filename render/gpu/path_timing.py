"""The mouth-frame paths timed against each other on one rig: renderers drawing in turn,
frame by frame, each frame timed from the call to the frame done on the GPU (glFinish).
bench/gpu.py reports its figures with this loop, and the app times both paths with it
on the rig it shows, at start, to choose its path (render/gpu/mouth_path.py).

Interleaved, so that whatever else the machine does at that moment falls on both paths
alike. Needs the GL context current; CUDA's renderers need what render/gpu/interop.py
names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from OpenGL import GL

from pipeline.core.frames import MouthPose
from render.gl.offscreen import ScratchTarget
from render.gpu.cuda_photo_renderer import CudaPhotoRenderer
from render.gpu.mouth_path import CUDA, OPENGL, PathTime, PathTimes
from render.rigs.loader import PHOTO, AvatarRig, kind_of, renderer_made

# Frames each path draws for the app's choice. P99 of 100 lies between the slowest frame
# and the next: a path that stalls once in a hundred frames shows it. On the H200 a
# frame took 0.2–0.8 ms on either path (docs/gpu.md), so both paths' 110 frames, warm-up
# included, take about 0.1 s at start, before the output shows its first frame.
MEASURED_FRAMES = 100
# Frames drawn first and not timed: a renderer's first frames pay for the driver's lazy
# work (a program's or a kernel's first use, textures made resident), once, which no
# later frame of the output pays.
WARM_UP_FRAMES = 10

Step = Callable[[object, int], None]  # (renderer, frame number): draws frame i


def interleaved_ms(renderers: Mapping[str, object], frames: int, steps: Mapping[str, Step], *,
                   warm_up: int = 0,
                   after: Callable[[str, str, object, int], None] | None = None,
                   ) -> dict[tuple[str, str], list[float]]:
    """Milliseconds of each step of each frame, by (renderer's name, step's name): frame
    by frame, each renderer in turn makes each step, timed from its call to glFinish.
    `warm_up` frames come first, untimed (numbered below 0). `after(name, step, renderer,
    i)`, untimed, follows each step (a benchmark reads the pixels there)."""
    times: dict[tuple[str, str], list[float]] = {(name, step): [] for name in renderers for step in steps}
    for i in range(-warm_up, frames):
        for name, renderer in renderers.items():
            for step, make in steps.items():
                start = time.perf_counter()
                make(renderer, i)
                GL.glFinish()
                if i >= 0:
                    times[name, step].append((time.perf_counter() - start) * 1000)
                if after is not None:
                    after(name, step, renderer, i)
    return times


def sprite_frame(renderer, i: int) -> None:
    """Frame i of the sprite rig: every viseme pair, cross-faded, blinking and breathing."""
    renderer.draw(MouthPose(i % 15, (i + 4) % 15, (i % 10) / 10, 0.5), (i % 7) / 7, (i % 5) / 5)


def photo_pose(i: int) -> MouthPose:
    """Frame i's mouth of the photo rig: every viseme pair, opening and shutting."""
    return MouthPose(i % 15, (i + 4) % 15, (i % 10) / 10, 0.2 + 0.8 * (i % 7) / 7)


def photo_mouth_frame(renderer, i: int) -> None:
    """Frame i's mouth frame of the photo rig: GL's vertex upload is part of its frame,
    and CUDA's kernels are waited for (glFinish does not wait for a CUDA stream)."""
    renderer.update(photo_pose(i), 0.0)
    renderer.render_mouth_frame()
    if isinstance(renderer, CudaPhotoRenderer):
        renderer.wait()


def timed_step(rig: AvatarRig) -> Step:
    """What the paths differ in for this kind of rig, and so what is timed: the photo
    rig's mouth frame (the composite around it is GL's on either path), the sprite rig's
    whole frame (CUDA makes all of it)."""
    return photo_mouth_frame if kind_of(rig) is PHOTO else sprite_frame


def measure_paths(rig: AvatarRig, size: tuple[int, int], frames: int = MEASURED_FRAMES,
                  warm_up: int = WARM_UP_FRAMES) -> PathTimes:
    """Both paths' renderers of `rig` at `size` (pixels), timed in the current context
    into a framebuffer of their own, then released. CudaError where CUDA's renderer
    cannot be made or draw."""
    renderers = {}
    with ScratchTarget(*size):
        try:
            for path in (OPENGL, CUDA):
                renderers[path] = renderer_made(rig, (0.0, 0.0, 0.0, 0.0), size, path)
            times = interleaved_ms(renderers, frames, {"frame": timed_step(rig)}, warm_up=warm_up)
        finally:
            for renderer in renderers.values():
                renderer.release()
    return PathTimes(size, PathTime.of(times[OPENGL, "frame"]), PathTime.of(times[CUDA, "frame"]),
                     frames)
