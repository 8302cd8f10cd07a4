"""The sprite rig's frames made by a CUDA kernel and handed to OpenGL through CUDA-GL
interop, with no copy through host memory: a drop-in for render/gl/sprite_renderer.py's
SpriteGLRenderer (same methods, same pixels within 2/255), so the presenter cannot tell
who made a frame.

The kernel (shaders/sprite.cu, compiled once with NVRTC) computes the whole frame —
the layers SpriteGLRenderer draws (sprite_renderer.SpriteLayout: base, eyes, expression
overlays, mouth, with the expression fade and the blink), the avatar's placement, GL's
blending and 8-bit rounding — from the rig's premultiplied images, uploaded to device memory once per rig. It writes the
frame into a GL texture registered with cudaGraphicsGLRegisterImage once, mapped and
unmapped around each frame on a non-blocking stream of the renderer's own; unmapping
orders the kernel before GL's next use of the texture, so the render thread never
synchronises the device or the stream. GL then blits the texture into the bound
framebuffer.

Needs what render/gpu/interop.py names; `cuda_unavailable()` says why not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from OpenGL import GL

from pipeline.core.avatar_state import AvatarState, still_state
from pipeline.core.frames import MouthPose
from pipeline.core.resources import SHADERS_DIR
from render.gl.sprite_renderer import (
    SpriteRigLike,
    SpriteLayout,
    inverse_placement,
    letterbox_fit,
    placement_matrix,
    premultiplied,
    read_framebuffer,
    rig_images,
    sprite_layout,
)
from render.gpu.interop import CudaError, Kernels, RegisteredTexture, cuda_unavailable, free, upload
from render.timing.idle_motion import breath_transform

__all__ = ["CudaError", "CudaSpriteRenderer", "cuda_unavailable"]

BLOCK = (16, 16)
MAX_LAYERS = 11  # shaders/sprite.cu's
LAYER = np.dtype([("images", np.uint64, 4), ("rect", np.float32, 4), ("inner", np.float32),
                  ("outer", np.float32), ("alpha", np.float32), ("unused", np.float32)])
# shaders/sprite.cu's Params, field for field.
PARAMS = np.dtype([("out", np.uint64), ("width", np.int32), ("height", np.int32),
                   ("canvas_w", np.int32), ("canvas_h", np.int32), ("layer_count", np.int32),
                   ("unused", np.int32), ("fit", np.float32, 2), ("offset_y", np.float32),
                   ("scale_y", np.float32), ("unplace", np.float32, 6), ("clear", np.float32, 4),
                   ("layers", LAYER, MAX_LAYERS)])


@dataclass(frozen=True)
class SpriteLayers:
    """What the kernel takes of a rig: its images (premultiplied), by name, and how its
    frames are made of them (the GL renderer's layout)."""

    images: dict[str, np.ndarray]
    layout: SpriteLayout


def sprite_layers(rig: SpriteRigLike) -> SpriteLayers:
    """The rig's layers, checked (rig_images): ValueError for a rig that cannot be drawn."""
    images = {name: np.ascontiguousarray(premultiplied(img)) for name, img in rig_images(rig).items()}
    return SpriteLayers(images, sprite_layout(rig))


def state_params(surface: int, pointers: dict[str, int], layers: SpriteLayers,
                 viewport: tuple[int, int], canvas_size: tuple[int, int], fit: tuple[float, float],
                 clear_color: tuple[float, float, float, float], state: AvatarState,
                 opacity: float) -> np.ndarray:
    """The kernel's Params (PARAMS, as bytes) for the frame of `state`. `pointers` are
    where each of `layers`' images lies, by name."""
    draws = layers.layout.layers(state, opacity)
    if len(draws) > MAX_LAYERS:
        raise ValueError(f"a frame of {len(draws)} layers; the kernel draws {MAX_LAYERS}")
    p = np.zeros((), PARAMS)
    offset_y, scale_y = breath_transform(state.breath)
    r, g, b, a = clear_color
    p["out"] = surface
    p["width"], p["height"] = viewport
    p["canvas_w"], p["canvas_h"] = canvas_size
    p["layer_count"] = len(draws)
    p["fit"] = fit
    p["offset_y"], p["scale_y"] = offset_y, scale_y
    p["unplace"] = inverse_placement(placement_matrix(state.placement(), canvas_size)).ravel()
    p["clear"] = (r * a, g * a, b * a, a)
    for record, draw in zip(p["layers"], draws):
        record["images"] = [pointers[name] for name in draw.images]
        record["rect"] = draw.rect
        record["inner"], record["outer"], record["alpha"] = draw.inner, draw.outer, draw.alpha
    return np.frombuffer(p.tobytes(), np.uint8).copy()


def frame_params(surface: int, pointers: dict[str, int], layers: SpriteLayers,
                 viewport: tuple[int, int], canvas_size: tuple[int, int], fit: tuple[float, float],
                 clear_color: tuple[float, float, float, float], pose: MouthPose, blink: float,
                 breath: float, opacity: float) -> np.ndarray:
    """state_params for a neutral, unmoved avatar at this mouth, blink and breath."""
    return state_params(surface, pointers, layers, viewport, canvas_size, fit, clear_color,
                        still_state(pose, blink, breath), opacity)


class CudaSpriteRenderer:
    """SpriteGLRenderer's interface, frames made by CUDA. Needs the GL context current, as
    SpriteGLRenderer does; `host_copies` counts host↔device copies (rig uploads only)."""

    def __init__(self, clear_color: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
                 shaders_dir=SHADERS_DIR) -> None:
        self.clear_color = clear_color
        self.shaders_dir = shaders_dir
        self.canvas_size = (0, 0)
        self.viewport = (1, 1)
        self.host_copies = 0
        self.frames = 0
        self._fit = (1.0, 1.0)
        self._images: dict[str, int] = {}  # device pointers of the rig's images
        self._layers: SpriteLayers | None = None
        self._texture = 0
        self._fbo = 0
        self._frame: RegisteredTexture | None = None
        self._kernels: Kernels | None = None

    def initialize(self) -> None:
        """Compile the kernel and make the stream. Once per GL context."""
        reason = cuda_unavailable()
        if reason is not None:
            raise CudaError(reason)
        self._kernels = Kernels(self.shaders_dir / "sprite.cu", "sprite_frame")
        self._fbo = int(GL.glGenFramebuffers(1))

    def set_rig(self, rig: SpriteRigLike) -> None:
        """Upload the rig's images (premultiplied) to device memory, once per rig."""
        layers = sprite_layers(rig)
        self._free_images()
        for name, img in layers.images.items():
            self._images[name] = upload(img)
            self.host_copies += 1
        self._layers = layers
        self.canvas_size = rig.canvas_size
        self._fit = letterbox_fit(self.canvas_size, self.viewport)

    def resize(self, width: int, height: int) -> None:
        """Set the target size in device pixels: the frame texture is made anew at it and
        registered with CUDA once."""
        self.viewport = (max(1, width), max(1, height))
        self._fit = letterbox_fit(self.canvas_size, self.viewport)
        self._free_texture()
        self._texture = int(GL.glGenTextures(1))
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._texture)
        GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, *self.viewport)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        # Each frame is written whole: the driver need not keep the last one.
        self._frame = RegisteredTexture(self._texture, write_discard=True)

    def draw(self, pose: MouthPose, blink: float, breath: float, opacity: float = 1.0) -> None:
        """draw_state for a neutral, unmoved avatar at this mouth, blink and breath."""
        self.draw_state(still_state(pose, blink, breath), opacity)

    def draw_state(self, state: AvatarState, opacity: float = 1.0) -> None:
        """Make the frame with CUDA into the frame texture, then blit it into the bound
        framebuffer (SpriteGLRenderer.draw_state's contract)."""
        if self._frame is None:
            self.resize(*self.viewport)
        if self._layers is None:
            r, g, b, a = self.clear_color
            GL.glViewport(0, 0, *self.viewport)
            GL.glClearColor(r * a, g * a, b * a, a)
            GL.glClear(GL.GL_COLOR_BUFFER_BIT)
            return
        w, h = self.viewport
        with self._frame.surface(self._kernels.stream) as surface:
            params = state_params(surface, self._images, self._layers, self.viewport,
                                  self.canvas_size, self._fit, self.clear_color, state, opacity)
            self._kernels.launch("sprite_frame", ((w + BLOCK[0] - 1) // BLOCK[0], (h + BLOCK[1] - 1) // BLOCK[1]),
                                 BLOCK, params)
        target = GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING)
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self._fbo)
        GL.glFramebufferTexture2D(GL.GL_READ_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0,
                                  GL.GL_TEXTURE_2D, self._texture, 0)
        GL.glBlitFramebuffer(0, 0, w, h, 0, 0, w, h, GL.GL_COLOR_BUFFER_BIT, GL.GL_NEAREST)
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, target)
        self.frames += 1

    def read_pixels(self) -> np.ndarray:
        """The bound framebuffer as HxWx4 uint8 RGBA (premultiplied), top row first."""
        return read_framebuffer(*self.viewport)

    def _free_images(self) -> None:
        for pointer in self._images.values():
            free(pointer)
        self._images = {}
        self._layers = None

    def _free_texture(self) -> None:
        if self._frame is not None:
            self._frame.unregister()
            self._frame = None
        if self._texture:
            GL.glDeleteTextures(1, [self._texture])
            self._texture = 0

    def release(self) -> None:
        """Free the device memory, the registration and the GL objects (context current)."""
        self._free_images()
        self._free_texture()
        if self._fbo:
            GL.glDeleteFramebuffers(1, [self._fbo])
            self._fbo = 0
        if self._kernels is not None:
            self._kernels.release()
            self._kernels = None
