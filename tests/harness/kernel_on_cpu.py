"""The CUDA kernels run on the CPU: each kernel's own source built by g++ with
cuda_on_cpu.h's stand-ins for the CUDA features it uses, and driven with the same
parameter records as the CUDA renderers make (render/gpu/cuda_photo_renderer.py,
render/gpu/cuda_sprite_renderer.py), the pointers being host addresses. So CI, which
has no GPU, checks what the kernels draw against GL's; the device side (interop, the
texture unit, launches) is the GPU test's."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np

from pipeline.core.frames import MouthPose
from pipeline.core.resources import SHADERS_DIR
from render.gl.sprite_renderer import SpriteRigLike, letterbox_fit
from render.gpu import cuda_sprite_renderer as sprite
from render.gpu.cuda_photo_renderer import (
    PARAMS,
    RESOLVE_THREADS,
    THREADS,
    frame_params,
    group_params,
    pose_params,
    rig_params,
    triangle_groups,
)
from render.rigs.photo import PhotoRig

_HARNESS = Path(__file__).parent


class _HostImage(ctypes.Structure):
    _fields_ = [("texels", ctypes.c_void_p), ("width", ctypes.c_int), ("height", ctypes.c_int)]


def build(folder: Path, kernel: str) -> ctypes.CDLL:
    """`kernel` ("photo_mouth" or "sprite": shaders/KERNEL.cu) as a shared library in
    `folder` (g++, C++17, warnings as errors)."""
    library = folder / f"{kernel}_cpu.so"
    subprocess.run(["g++", "-O2", "-std=c++17", "-shared", "-fPIC", "-Wall", "-Werror",
                    f"-I{SHADERS_DIR}", f"-I{_HARNESS}", "-x", "c++", str(_HARNESS / f"{kernel}_cpu.cpp"),
                    "-o", str(library)], check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(library))


class _HostTexture(ctypes.Structure):
    _fields_ = [("levels", ctypes.c_int), ("level", _HostImage * 16)]


class CpuMouthFrames:
    """Mouth frames of `rig` at `size` texels, made by the kernel on the CPU over `still`
    (H×W×4, the frame's still picture), each over the last as GL draws each over the
    last. `levels` are the picture's mipmap levels as GL holds them (level 0 first),
    `mipmaps` whether the frame samples them (shown smaller), `snap` GL's sub-pixel
    steps per pixel."""

    def __init__(self, lib: ctypes.CDLL, rig: PhotoRig, size: tuple[int, int], still: np.ndarray,
                 levels: list[np.ndarray], mipmaps: bool, snap: float) -> None:
        lib.mouth_triangles_on_cpu.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        lib.mouth_resolve_on_cpu.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self._lib, self._rig = lib, rig
        self.frame = np.ascontiguousarray(still.copy())
        self._levels = [np.ascontiguousarray(level) for level in levels]
        self._arrays = {"rest": np.ascontiguousarray(rig.rest, np.float32),
                        "basis": np.ascontiguousarray(rig.basis, np.float32),
                        "statics": np.ascontiguousarray(rig.static, np.float32),
                        "skin": np.ascontiguousarray(rig.mouth_triangles, np.uint32),
                        "cavity": np.ascontiguousarray(rig.cavity_triangles, np.uint32)}
        self._frame = _HostImage(self.frame.ctypes.data, *size)
        self._owner = np.zeros(size[0] * size[1], np.uint64)
        self._picture = _HostTexture(len(self._levels), (_HostImage * 16)(*(
            _HostImage(level.ctypes.data, level.shape[1], level.shape[0]) for level in self._levels)))
        p = self._params = np.zeros(1, PARAMS)
        for name in ("rest", "basis", "statics"):
            p[name] = self._arrays[name].ctypes.data
        p["frame"], p["picture"] = ctypes.addressof(self._frame), ctypes.addressof(self._picture)
        p["owner"], p["snap"] = self._owner.ctypes.data, snap
        rig_params(p, rig)
        frame_params(p, rig, size, mipmaps)

    def draw(self, pose: MouthPose, blink: float = 0.0) -> np.ndarray:
        """The frame at `pose` (a view of the harness's frame: copy to keep it)."""
        p = self._params
        pose_params(p, self._rig, pose, blink)
        for name, count, first in triangle_groups(self._rig):
            if count:
                group_params(p, name, first, self._arrays[name].ctypes.data)
                self._lib.mouth_triangles_on_cpu(p.ctypes.data, count, THREADS)
        self._lib.mouth_resolve_on_cpu(p.ctypes.data, RESOLVE_THREADS)
        return self.frame


class CpuSpriteFrames:
    """Sprite frames of `rig` at `viewport` made by the kernel on the CPU; rows bottom
    first, as the kernel writes them into a GL texture."""

    def __init__(self, lib: ctypes.CDLL, rig: SpriteRigLike, viewport: tuple[int, int],
                 clear_color: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)) -> None:
        lib.sprite_frame_on_cpu.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        self._lib, self._viewport, self._clear = lib, viewport, clear_color
        self._canvas = rig.canvas_size
        self._fit = letterbox_fit(rig.canvas_size, viewport)
        self._layers = sprite.sprite_layers(rig)
        self._pointers = {name: image.ctypes.data for name, image in self._layers.images.items()}
        self.frame = np.zeros((viewport[1], viewport[0], 4), np.uint8)
        self._image = _HostImage(self.frame.ctypes.data, *viewport)

    def draw(self, pose: MouthPose, blink: float, breath: float, opacity: float = 1.0) -> np.ndarray:
        """The frame, top row first (as GL's read_pixels gives it)."""
        params = sprite.frame_params(ctypes.addressof(self._image), self._pointers, self._layers,
                                     self._viewport, self._canvas, self._fit, self._clear, pose,
                                     blink, breath, opacity)
        self._lib.sprite_frame_on_cpu(params.ctypes.data, *sprite.BLOCK)
        return self.frame[::-1]
