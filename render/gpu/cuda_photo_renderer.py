"""The photo rig's mouth frame made by a CUDA kernel, written straight into the GL mouth
frame texture through CUDA-GL interop: a drop-in for render/gl/photo_renderer.py's
PhotoRenderer (same methods), so the presenter cannot tell who made a frame.

Same pixels: the kernel's source, built for the CPU, draws GL's mouth frames within
2/255 (tests/test_kernels_on_cpu.py, against llvmpipe, in CI); on an NVIDIA GPU
tests/test_gpu_frames.py compares this renderer with PhotoRenderer (docs/gpu.md).
Triangles that overlap where the mesh folds are shaded by blocks at once, so each
pixel keeps its latest triangle in GL's drawing order (an atomic max) and a third
launch writes the winners: the skin, the opening, then the resolve.

PhotoRenderer's mouth frame is a complete picture of the mouth rectangle, which the
composite lays over the still picture; only its making is replaced here. The kernel
(shaders/photo_mouth.cu, compiled once with NVRTC) sums each vertex's record from
the rig's rest records and pose basis on the device (the pose reaches it as five
basis rows and weights in the launch's parameters), then rasterises the mouth/jaw
skin and the mouth opening (cavity and teeth) as GL does, sampling the picture
through the texture unit. The rig's records and triangles go up once per rig; the
picture and its mipmaps are copied from its GL texture, device to device, once. The
mouth frame texture is registered once and mapped around each frame on the kernels'
own non-blocking stream (render/gpu/interop.py), so the render thread never waits for
the device. The composite (picture, breathing, fades, the eyes) and the face warp over
it (head pose and expressions, render/rigs/photo_face.py) stay GL's, so this renderer
draws every AvatarState as PhotoRenderer does (tests/test_gpu_photo_motion.py); the eye
meshes' records go up to GL only while they blink, as the GL path sends all records.
"""

from __future__ import annotations

import math

import numpy as np
from OpenGL import GL

from pipeline.core.frames import MouthPose
from pipeline.core.resources import SHADERS_DIR
from render.gl.photo_renderer import PhotoRenderer, mouth_frame_transform
from render.gpu.interop import (
    CudaError,
    Kernels,
    MipmappedTexture,
    RegisteredTexture,
    cuda_unavailable,
    free,
    synchronize,
    upload,
    zeroed,
)
from render.rigs.photo import PhotoRig

# Threads per triangle: a mouth frame's triangles cover ~10²–10³ pixels each at
# 512–1024 px frames, so a block walks its box in a few strides.
THREADS = 128
# Threads per block of mouth_resolve, one per pixel of the frame.
RESOLVE_THREADS = 256
_TERMS = 5

# shaders/photo_mouth.cu's Params; align=True lays it out as the C compiler does.
PARAMS = np.dtype([
    ("frame", np.uint64), ("picture", np.uint64), ("rest", np.uint64), ("basis", np.uint64),
    ("statics", np.uint64), ("triangles", np.uint64), ("owner", np.uint64),
    ("vertices", np.int32), ("width", np.int32), ("height", np.int32), ("cavity", np.int32),
    ("first", np.int32),
    ("rows", np.int32, (_TERMS,)), ("mipmaps", np.int32), ("weights", np.float32, (_TERMS,)),
    ("scale_x", np.float32), ("scale_y", np.float32), ("offset_x", np.float32), ("offset_y", np.float32),
    ("canvas_w", np.float32), ("canvas_h", np.float32), ("mouth_width", np.float32), ("teeth", np.float32),
    ("down_x", np.float32), ("down_y", np.float32), ("snap", np.float32),
    ("colours", np.float32, (13,)),
], align=True)


def rig_params(p: np.ndarray, rig: PhotoRig) -> None:
    """Fill `p` (PARAMS) with what a rig fixes; the buffers' addresses are the caller's."""
    w, h = rig.canvas_size
    p["vertices"] = rig.vertex_count
    p["canvas_w"], p["canvas_h"] = w, h
    p["mouth_width"], p["teeth"] = rig.mouth_width, rig.teeth_height
    p["down_x"], p["down_y"] = rig.face_down[0] / w, rig.face_down[1] / h
    p["colours"] = rig.colours.as_array()


def frame_params(p: np.ndarray, rig: PhotoRig, size: tuple[int, int], mipmaps: bool) -> None:
    """Fill `p` with the mouth frame's size in texels and its placement (the uniforms
    PhotoRenderer gives photo_skin.vert and photo_cavity.vert)."""
    p["width"], p["height"] = size
    p["mipmaps"] = int(mipmaps)
    (p["scale_x"], p["scale_y"]), (p["offset_x"], p["offset_y"]) = mouth_frame_transform(rig.mouth_rect)


def pose_params(p: np.ndarray, rig: PhotoRig, pose: MouthPose, blink: float) -> None:
    """Fill `p` with the basis rows and weights of a pose."""
    p["rows"], p["weights"] = rig.pose_terms(pose, blink)


def triangle_groups(rig: PhotoRig) -> tuple[tuple[str, int, int], ...]:
    """(buffer name, triangles, place of the first in GL's drawing order) per launch, in
    that order: the cavity over the skin."""
    skin = len(rig.mouth_triangles)
    return ("skin", skin, 0), ("cavity", len(rig.cavity_triangles), skin)


def group_params(p: np.ndarray, name: str, first: int, triangles: int) -> None:
    """Fill `p` for the launch of group `name` (triangle_groups) whose triangles are at
    device address `triangles`."""
    p["cavity"], p["first"], p["triangles"] = name == "cavity", first, triangles


def resolve_blocks(size: tuple[int, int]) -> int:
    """mouth_resolve's blocks for a frame of `size` texels."""
    return -(-size[0] * size[1] // RESOLVE_THREADS)


class CudaPhotoRenderer(PhotoRenderer):
    """PhotoRenderer whose mouth frames CUDA makes. Needs the GL context current;
    `host_copies` counts host→device copies (rig uploads only), `vertex_uploads` the
    eye records sent to GL during blinks."""

    def __init__(self, clear_color: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
                 shaders_dir=SHADERS_DIR) -> None:
        super().__init__(clear_color, shaders_dir)
        self.host_copies = 0
        self.vertex_uploads = 0
        self.frames = 0
        self._kernels: Kernels | None = None
        self._frame: RegisteredTexture | None = None
        self._picture_copy: MipmappedTexture | None = None
        self._buffers: dict[str, int] = {}
        # The frame's pixels' latest triangle and colour (shaders/photo_mouth.cu), zeroed
        # once: mouth_resolve clears what a frame wrote. Its address is the parameter
        # record's "owner" (0: none), made for frames of this size.
        self._owner_size: tuple[int, int] | None = None
        self._params = np.zeros(1, PARAMS)

    def initialize(self) -> None:
        """Compile the shaders and the kernel, make the buffers and the stream. Once per
        GL context."""
        reason = cuda_unavailable()
        if reason is not None:
            raise CudaError(reason)
        super().initialize()
        self._kernels = Kernels(self.shaders_dir / "photo_mouth.cu", "mouth_triangles", "mouth_resolve")
        # GL snaps vertices to this grid before it rasterises; the kernel does the same.
        self._params["snap"] = float(1 << max(1, int(GL.glGetIntegerv(GL.GL_SUBPIXEL_BITS))))

    def set_rig(self, rig: PhotoRig) -> None:
        """PhotoRenderer.set_rig, then the rig's records and triangles up to the device
        and the picture copied into a CUDA texture."""
        self._free_rig_buffers()
        super().set_rig(rig)
        for name, array in (("rest", rig.rest), ("basis", rig.basis), ("statics", rig.static),
                            ("skin", rig.mouth_triangles), ("cavity", rig.cavity_triangles)):
            self._buffers[name] = upload(array.astype(np.uint32 if array.dtype.kind == "u" else np.float32))
            self.host_copies += 1
        w, h = rig.canvas_size
        self._picture_copy = MipmappedTexture(self._picture, w, h, int(math.log2(max(w, h))) + 1,
                                              self._kernels.stream)
        p = self._params
        for name in ("rest", "basis", "statics"):
            p[name] = self._buffers[name]
        p["picture"] = self._picture_copy.handle
        rig_params(p, rig)

    def _fit_mouth_frame(self) -> None:
        super()._fit_mouth_frame()
        if self._frame is None or self._frame.texture != self.mouth_texture:
            if self._frame is not None:
                self._frame.unregister()
            # Load/store: a frame writes only inside the mesh; the still picture GL drew
            # into the rest of the texture must stay.
            self._frame = RegisteredTexture(self.mouth_texture, write_discard=False)
        if self._owner_size != self.mouth_size:
            self._free_owner()
            w, h = self.mouth_size
            self._params["owner"] = zeroed(w * h * 8, self._kernels.stream)
            self._owner_size = self.mouth_size
        frame_params(self._params, self._rig, self.mouth_size, self.frame_scale() < 1.0)

    def update(self, pose: MouthPose, blink: float) -> None:
        """Keep the pose for the next mouth frame; the eye meshes' records go up to GL
        only while they blink (the composite draws them only then)."""
        if blink > 0.0:
            if self._uploaded != (pose, blink):
                self.vertex_uploads += 1
            super().update(pose, blink)
        else:
            self._pose, self._blink = pose, blink

    def render_mouth_frame(self) -> int:
        """Make the mouth frame at the kept pose with CUDA into `mouth_texture` (unless it
        holds that pose already) and return it. No GL state changes."""
        if self._frame_pose == self._pose:
            return self.mouth_texture
        p = self._params
        pose_params(p, self._rig, self._pose, self._blink)
        with self._frame.surface(self._kernels.stream) as surface:
            p["frame"] = surface
            for name, count, first in triangle_groups(self._rig):
                if count:
                    group_params(p, name, first, self._buffers[name])
                    self._kernels.launch("mouth_triangles", (count, 1), (THREADS, 1), p)
            self._kernels.launch("mouth_resolve", (resolve_blocks(self.mouth_size), 1),
                                 (RESOLVE_THREADS, 1), p)
        self._frame_pose = self._pose
        self.frames += 1
        return self.mouth_texture

    def wait(self) -> None:
        """Return once the mouth frame's launches are done: for timing them (glFinish does
        not wait for the kernels' stream; the render thread never waits)."""
        synchronize(self._kernels.stream)

    def _delete_mouth_frame(self) -> None:
        # CUDA lets go of the texture before GL deletes it.
        if self._frame is not None:
            self._frame.unregister()
            self._frame = None
        super()._delete_mouth_frame()

    def _free_rig_buffers(self) -> None:
        for pointer in self._buffers.values():
            free(pointer)
        self._buffers = {}
        if self._picture_copy is not None:
            self._picture_copy.release()
            self._picture_copy = None

    def _free_owner(self) -> None:
        owner = int(self._params["owner"][0])
        if owner:
            free(owner)
        self._params["owner"], self._owner_size = 0, None

    def release(self) -> None:
        """Free the device memory, the registrations and the GL objects (context current)."""
        self._free_rig_buffers()
        self._free_owner()
        super().release()
        if self._kernels is not None:
            self._kernels.release()
            self._kernels = None
