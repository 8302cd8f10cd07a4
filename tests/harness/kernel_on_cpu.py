"""shaders/photo_mouth.cu's mouth frame made on the CPU: the kernel's own source built
by g++ with photo_mouth_cpu.cpp's stand-ins for the CUDA features it uses, and driven
with the same parameter record (render/gpu/cuda_photo_renderer.py's PARAMS and its
fill functions) as the CUDA renderer, the pointers being host addresses. So CI, which
has no GPU, checks the kernel's rasterisation and shading against GL's; the device
side of it (interop, texture unit, launches) is the GPU test's."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np

from pipeline.core.frames import MouthPose
from pipeline.core.resources import SHADERS_DIR
from render.gl.sprite_renderer import premultiplied
from render.gpu.cuda_photo_renderer import (
    PARAMS,
    THREADS,
    frame_params,
    pose_params,
    rig_params,
    triangle_groups,
)
from render.rigs.photo import PhotoRig

_SOURCE = Path(__file__).with_name("photo_mouth_cpu.cpp")


class _HostImage(ctypes.Structure):
    _fields_ = [("texels", ctypes.c_void_p), ("width", ctypes.c_int), ("height", ctypes.c_int)]


def build(folder: Path) -> ctypes.CDLL:
    """The kernel as a shared library in `folder` (g++, C++17)."""
    library = folder / "photo_mouth_cpu.so"
    subprocess.run(["g++", "-O2", "-std=c++17", "-shared", "-fPIC", "-Wall", "-Werror",
                    f"-I{SHADERS_DIR}", "-x", "c++", str(_SOURCE), "-o", str(library)],
                   check=True, capture_output=True, text=True)
    lib = ctypes.CDLL(str(library))
    lib.mouth_triangles_on_cpu.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    if lib.params_size() != PARAMS.itemsize:
        raise AssertionError(f"Params is {lib.params_size()} bytes in C, PARAMS {PARAMS.itemsize}")
    return lib


class CpuMouthFrames:
    """Mouth frames of `rig` at `size` texels (the rectangle shown at full size), made by
    the kernel on the CPU over `still` (H×W×4, the frame's still picture), each over
    the last as GL draws each over the last; `snap` is GL's sub-pixel steps per pixel."""

    def __init__(self, lib: ctypes.CDLL, rig: PhotoRig, size: tuple[int, int], still: np.ndarray,
                 snap: float) -> None:
        x0, y0, x1, y1 = rig.mouth_rect
        if size != (x1 - x0, y1 - y0):
            raise ValueError("the CPU kernel samples level 0 only: show the mouth frame at full size")
        self._lib, self._rig = lib, rig
        self.frame = np.ascontiguousarray(still.copy())
        self._picture = np.ascontiguousarray(premultiplied(rig.image))
        self._arrays = {"rest": np.ascontiguousarray(rig.rest, np.float32),
                        "basis": np.ascontiguousarray(rig.basis, np.float32),
                        "statics": np.ascontiguousarray(rig.static, np.float32),
                        "skin": np.ascontiguousarray(rig.mouth_triangles, np.uint32),
                        "cavity": np.ascontiguousarray(rig.cavity_triangles, np.uint32)}
        self._images = (_HostImage(self.frame.ctypes.data, *size),
                        _HostImage(self._picture.ctypes.data, *rig.canvas_size))
        p = self._params = np.zeros(1, PARAMS)
        for name in ("rest", "basis", "statics"):
            p[name] = self._arrays[name].ctypes.data
        p["frame"], p["picture"] = (ctypes.addressof(image) for image in self._images)
        p["snap"] = snap
        rig_params(p, rig)
        frame_params(p, rig, size, mipmaps=False)

    def draw(self, pose: MouthPose, blink: float = 0.0) -> np.ndarray:
        """The frame at `pose` (a view of the harness's frame: copy to keep it)."""
        p = self._params
        pose_params(p, self._rig, pose, blink)
        for name, count in triangle_groups(self._rig):
            if count:
                p["cavity"], p["triangles"] = name == "cavity", self._arrays[name].ctypes.data
                self._lib.mouth_triangles_on_cpu(p.ctypes.data, count, THREADS)
        return self.frame
