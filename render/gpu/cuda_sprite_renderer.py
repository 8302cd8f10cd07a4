"""The sprite rig's frames made by a CUDA kernel and handed to OpenGL through CUDA-GL
interop, with no copy through host memory: a drop-in for render/gl/sprite_renderer.py's
GLRenderer (same methods, same pixels within 2/255), so the presenter cannot tell
who made a frame.

The kernel (shaders/sprite.cu, compiled once with NVRTC) computes the whole frame —
base, eyes cross-fade, mouth cross-fade, GL's blending and 8-bit rounding — from the
rig's premultiplied images, uploaded to device memory once per rig. It writes the
frame into a GL texture registered with cudaGraphicsGLRegisterImage once, mapped and
unmapped around each frame on a non-blocking stream of the renderer's own; unmapping
orders the kernel before GL's next use of the texture, so the render thread never
synchronises the device or the stream. GL then blits the texture into the bound
framebuffer.

Needs an NVIDIA GPU, its driver's GL (an EGL device context or an X session on the
NVIDIA driver) and cuda-python (`pip install .[gpu]`); `cuda_unavailable()` says why
not, in one line, where any of them is missing.
"""

from __future__ import annotations

import numpy as np
from OpenGL import GL

from pipeline.core.frames import MouthPose
from pipeline.core.resources import SHADERS_DIR
from pipeline.core.visemes import OVR_VISEMES
from render.gl.sprite_renderer import (
    Rig,
    coverage_rect,
    letterbox_fit,
    premultiplied,
    read_framebuffer,
    rig_images,
)
from render.timing.idle_motion import breath_transform

_BLOCK = (16, 16)


class CudaError(RuntimeError):
    """A CUDA, NVRTC or interop call failed; the message names the call and the error."""


def cuda_unavailable() -> str | None:
    """Why CUDA frames cannot be made in this process (None: they can)."""
    try:
        from cuda.bindings import runtime
    except ImportError:
        return "cuda-python is not installed (pip install .[gpu])"
    err, count = runtime.cudaGetDeviceCount()
    if err != runtime.cudaError_t.cudaSuccess or count == 0:
        return f"no CUDA device ({runtime.cudaGetErrorString(err)[1].decode()})"
    renderer = GL.glGetString(GL.GL_RENDERER) or b""
    if b"NVIDIA" not in renderer:
        return f"the GL context is not on the NVIDIA driver ({renderer.decode()}): no interop"
    return None


def _check(result, call: str):
    """The value(s) of a cuda-python call, or CudaError naming `call` and the error."""
    err, *values = result
    if int(err) != 0:
        raise CudaError(f"{call} failed: {err!r}")
    return values[0] if len(values) == 1 else values


def _compile(source: str, name: str) -> bytes:
    """`source` compiled by NVRTC to PTX for the current device."""
    from cuda.bindings import nvrtc, runtime

    device = _check(runtime.cudaGetDevice(), "cudaGetDevice")
    major = _check(runtime.cudaDeviceGetAttribute(
        runtime.cudaDeviceAttr.cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute")
    minor = _check(runtime.cudaDeviceGetAttribute(
        runtime.cudaDeviceAttr.cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute")
    program = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []),
                     "nvrtcCreateProgram")
    options = [f"--gpu-architecture=compute_{major}{minor}".encode()]
    err, = nvrtc.nvrtcCompileProgram(program, len(options), options)
    if int(err) != 0:
        size = _check(nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(program, log)
        raise CudaError(f"{name} failed to compile:\n{log.decode(errors='replace')}")
    size = _check(nvrtc.nvrtcGetPTXSize(program), "nvrtcGetPTXSize")
    ptx = b" " * size
    _check(nvrtc.nvrtcGetPTX(program, ptx), "nvrtcGetPTX")
    return ptx


class CudaSpriteRenderer:
    """GLRenderer's interface, frames made by CUDA. Needs the GL context current, as
    GLRenderer does; `host_copies` counts host↔device copies (rig uploads only)."""

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
        self._viseme_images: list[int] = []
        self._rects = np.zeros(12, np.float32)
        self._texture = 0
        self._fbo = 0
        self._resource = None
        self._stream = None
        self._function = None
        self._module = None

    def initialize(self) -> None:
        """Compile the kernel and make the stream. Once per GL context."""
        from cuda.bindings import driver, runtime

        reason = cuda_unavailable()
        if reason is not None:
            raise CudaError(reason)
        _check(runtime.cudaFree(0), "cudaFree")  # makes the device's primary context current
        ptx = _compile((self.shaders_dir / "sprite.cu").read_text(), "sprite.cu")
        self._module = _check(driver.cuModuleLoadData(ptx), "cuModuleLoadData")
        self._function = _check(driver.cuModuleGetFunction(self._module, b"sprite_frame"),
                                "cuModuleGetFunction")
        self._stream = _check(runtime.cudaStreamCreateWithFlags(
            runtime.cudaStreamNonBlocking), "cudaStreamCreateWithFlags")
        self._fbo = int(GL.glGenFramebuffers(1))

    def set_rig(self, rig: Rig) -> None:
        """Upload the rig's images (premultiplied) to device memory, once per rig."""
        from cuda.bindings import runtime

        w, h = rig.canvas_size
        images = rig_images(rig)
        self._free_images()
        for name, img in images.items():
            data = np.ascontiguousarray(premultiplied(img))
            pointer = _check(runtime.cudaMalloc(data.nbytes), "cudaMalloc")
            _check(runtime.cudaMemcpy(pointer, data.ctypes.data, data.nbytes,
                                      runtime.cudaMemcpyKind.cudaMemcpyHostToDevice), "cudaMemcpy")
            self.host_copies += 1
            self._images[name] = int(pointer)
        rest = rig.viseme_to_mouth.get("sil", next(iter(rig.mouths)))
        self._viseme_images = [self._images[f"mouth:{rig.viseme_to_mouth.get(v, rest)}"]
                               for v in OVR_VISEMES]
        self._rects = np.array([*coverage_rect(rig.base),
                                *coverage_rect(rig.eyes_open, rig.eyes_closed),
                                *coverage_rect(*rig.mouths.values())], np.float32)
        self.canvas_size = (w, h)
        self._fit = letterbox_fit(self.canvas_size, self.viewport)

    def resize(self, width: int, height: int) -> None:
        """Set the target size in device pixels: the frame texture is made anew at it and
        registered with CUDA once."""
        from cuda.bindings import runtime

        self.viewport = (max(1, width), max(1, height))
        self._fit = letterbox_fit(self.canvas_size, self.viewport)
        self._free_texture()
        self._texture = int(GL.glGenTextures(1))
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._texture)
        GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, *self.viewport)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        self._resource = _check(runtime.cudaGraphicsGLRegisterImage(
            self._texture, GL.GL_TEXTURE_2D,
            runtime.cudaGraphicsRegisterFlags.cudaGraphicsRegisterFlagsWriteDiscard),
            "cudaGraphicsGLRegisterImage")

    def draw(self, pose: MouthPose, blink: float, breath: float, opacity: float = 1.0) -> None:
        """Make the frame with CUDA into the frame texture, then blit it into the bound
        framebuffer (GLRenderer.draw's contract)."""
        if self._resource is None:
            self.resize(*self.viewport)
        if self._viseme_images:
            self._launch(pose, blink, breath, opacity)
        else:
            r, g, b, a = self.clear_color
            GL.glViewport(0, 0, *self.viewport)
            GL.glClearColor(r * a, g * a, b * a, a)
            GL.glClear(GL.GL_COLOR_BUFFER_BIT)
            return
        target = GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING)
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self._fbo)
        GL.glFramebufferTexture2D(GL.GL_READ_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0,
                                  GL.GL_TEXTURE_2D, self._texture, 0)
        w, h = self.viewport
        GL.glBlitFramebuffer(0, 0, w, h, 0, 0, w, h, GL.GL_COLOR_BUFFER_BIT, GL.GL_NEAREST)
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, target)
        self.frames += 1

    def _launch(self, pose: MouthPose, blink: float, breath: float, opacity: float) -> None:
        from cuda.bindings import driver, runtime

        _check(runtime.cudaGraphicsMapResources(1, self._resource, self._stream),
               "cudaGraphicsMapResources")
        try:
            array = _check(runtime.cudaGraphicsSubResourceGetMappedArray(self._resource, 0, 0),
                           "cudaGraphicsSubResourceGetMappedArray")
            description = runtime.cudaResourceDesc()
            description.resType = runtime.cudaResourceType.cudaResourceTypeArray
            description.res.array.array = array
            surface = _check(runtime.cudaCreateSurfaceObject(description),
                             "cudaCreateSurfaceObject")
            try:
                params = self._params(int(surface), pose, blink, breath, opacity)
                pointers = np.array([params.ctypes.data], np.uint64)
                w, h = self.viewport
                _check(driver.cuLaunchKernel(
                    self._function, (w + _BLOCK[0] - 1) // _BLOCK[0],
                    (h + _BLOCK[1] - 1) // _BLOCK[1], 1, _BLOCK[0], _BLOCK[1], 1, 0,
                    driver.CUstream(int(self._stream)), pointers.ctypes.data, 0), "cuLaunchKernel")
            finally:
                # Destroying the surface object waits for nothing: the launch holds what it
                # needs (CUDA keeps the array alive until the kernel is done).
                runtime.cudaDestroySurfaceObject(surface)
        finally:
            _check(runtime.cudaGraphicsUnmapResources(1, self._resource, self._stream),
                   "cudaGraphicsUnmapResources")

    def _params(self, surface: int, pose: MouthPose, blink: float, breath: float,
                opacity: float) -> np.ndarray:
        """shaders/sprite.cu's Params, byte for byte: 6 pointers, 4 ints, 24 floats."""
        offset_y, scale_y = breath_transform(breath)
        r, g, b, a = self.clear_color
        pointers = np.array([surface, self._images["base"], self._images["eyes_open"],
                             self._images["eyes_closed"], self._viseme_images[pose.viseme_a],
                             self._viseme_images[pose.viseme_b]], np.uint64)
        sizes = np.array([*self.viewport, *self.canvas_size], np.int32)
        floats = np.array([blink, pose.mix, opacity, *self._fit, offset_y, scale_y, 0.0,
                           r * a, g * a, b * a, a, *self._rects], np.float32)
        return np.frombuffer(pointers.tobytes() + sizes.tobytes() + floats.tobytes(), np.uint8).copy()

    def read_pixels(self) -> np.ndarray:
        """The bound framebuffer as HxWx4 uint8 RGBA (premultiplied), top row first."""
        return read_framebuffer(*self.viewport)

    def _free_images(self) -> None:
        from cuda.bindings import runtime

        for pointer in self._images.values():
            runtime.cudaFree(pointer)
        self._images = {}
        self._viseme_images = []

    def _free_texture(self) -> None:
        from cuda.bindings import runtime

        if self._resource is not None:
            runtime.cudaGraphicsUnregisterResource(self._resource)
            self._resource = None
        if self._texture:
            GL.glDeleteTextures(1, [self._texture])
            self._texture = 0

    def release(self) -> None:
        """Free the device memory, the registration and the GL objects (context current)."""
        from cuda.bindings import driver, runtime

        self._free_images()
        self._free_texture()
        if self._fbo:
            GL.glDeleteFramebuffers(1, [self._fbo])
            self._fbo = 0
        if self._stream is not None:
            runtime.cudaStreamDestroy(self._stream)
            self._stream = None
        if self._module is not None:
            driver.cuModuleUnload(self._module)
            self._module = None

