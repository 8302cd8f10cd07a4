"""What every CUDA frame producer needs: cuda-python calls checked, kernels compiled with
NVRTC, and GL textures registered with CUDA once and mapped around each frame.

Needs an NVIDIA GPU, its driver's GL (an EGL device context or an X session on the
NVIDIA driver) and cuda-python (`pip install .[gpu]`); `cuda_unavailable()` says why
not, in one line, where any of them is missing. Imports of cuda.bindings stay inside
the functions, so this module loads on machines without it.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np
from OpenGL import GL

from pipeline.infer.device_memory import CudaError, check


def cuda_unavailable() -> str | None:
    """Why CUDA frames cannot be made in this process (None: they can). Needs the GL
    context current."""
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


def _ptx(source: str, name: str) -> bytes:
    """`source` compiled by NVRTC to PTX for the current device."""
    from cuda.bindings import nvrtc, runtime

    device = check(runtime.cudaGetDevice(), "cudaGetDevice")
    major = check(runtime.cudaDeviceGetAttribute(
        runtime.cudaDeviceAttr.cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute")
    minor = check(runtime.cudaDeviceGetAttribute(
        runtime.cudaDeviceAttr.cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute")
    program = check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []),
                    "nvrtcCreateProgram")
    options = [f"--gpu-architecture=compute_{major}{minor}".encode()]
    err, = nvrtc.nvrtcCompileProgram(program, len(options), options)
    if int(err) != 0:
        size = check(nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(program, log)
        raise CudaError(f"{name} failed to compile:\n{log.decode(errors='replace')}")
    size = check(nvrtc.nvrtcGetPTXSize(program), "nvrtcGetPTXSize")
    ptx = b" " * size
    check(nvrtc.nvrtcGetPTX(program, ptx), "nvrtcGetPTX")
    return ptx


class Kernels:
    """The kernels of one .cu file, compiled once, launched on a non-blocking stream of
    their own. Each kernel takes one argument: a struct passed by value, whose bytes
    the caller lays out (numpy with align=True follows C's layout)."""

    def __init__(self, path: Path, *names: str) -> None:
        from cuda.bindings import driver, runtime

        check(runtime.cudaFree(0), "cudaFree")  # makes the device's primary context current
        self._module = check(driver.cuModuleLoadData(_ptx(path.read_text(), path.name)),
                             "cuModuleLoadData")
        self._functions = {name: check(driver.cuModuleGetFunction(self._module, name.encode()),
                                       "cuModuleGetFunction") for name in names}
        self.stream = check(runtime.cudaStreamCreateWithFlags(runtime.cudaStreamNonBlocking),
                            "cudaStreamCreateWithFlags")

    def launch(self, name: str, grid: tuple[int, int], block: tuple[int, int],
               params: np.ndarray) -> None:
        """Queue kernel `name` on the stream; returns at once (`params` is copied into
        the launch)."""
        from cuda.bindings import driver

        pointers = np.array([params.ctypes.data], np.uint64)
        check(driver.cuLaunchKernel(self._functions[name], grid[0], grid[1], 1, block[0], block[1], 1,
                                    0, driver.CUstream(int(self.stream)), pointers.ctypes.data, 0),
              "cuLaunchKernel")

    def release(self) -> None:
        from cuda.bindings import driver, runtime

        runtime.cudaStreamDestroy(self.stream)
        driver.cuModuleUnload(self._module)


class RegisteredTexture:
    """A GL texture registered with CUDA once; `surface()` maps it around one frame's
    writes. Mapping on the kernels' stream orders GL's earlier work on the texture
    before them, and unmapping orders them before GL's next use, so nothing on the
    render thread waits for the device."""

    def __init__(self, texture: int, write_discard: bool) -> None:
        from cuda.bindings import runtime

        flags = runtime.cudaGraphicsRegisterFlags
        self.texture = texture
        self._resource = check(runtime.cudaGraphicsGLRegisterImage(
            texture, GL.GL_TEXTURE_2D,
            flags.cudaGraphicsRegisterFlagsWriteDiscard if write_discard
            else flags.cudaGraphicsRegisterFlagsSurfaceLoadStore),
            "cudaGraphicsGLRegisterImage")

    @contextmanager
    def surface(self, stream):
        """The texture's level 0 as a surface object, mapped for the block's launches."""
        from cuda.bindings import runtime

        check(runtime.cudaGraphicsMapResources(1, self._resource, stream), "cudaGraphicsMapResources")
        try:
            array = check(runtime.cudaGraphicsSubResourceGetMappedArray(self._resource, 0, 0),
                          "cudaGraphicsSubResourceGetMappedArray")
            description = runtime.cudaResourceDesc()
            description.resType = runtime.cudaResourceType.cudaResourceTypeArray
            description.res.array.array = array
            surface = check(runtime.cudaCreateSurfaceObject(description), "cudaCreateSurfaceObject")
            try:
                yield int(surface)
            finally:
                # Waits for nothing: CUDA keeps the array alive until the launches are done.
                runtime.cudaDestroySurfaceObject(surface)
        finally:
            check(runtime.cudaGraphicsUnmapResources(1, self._resource, stream),
                  "cudaGraphicsUnmapResources")

    def unregister(self) -> None:
        from cuda.bindings import runtime

        runtime.cudaGraphicsUnregisterResource(self._resource)


class MipmappedTexture:
    """A device copy of a GL texture with all its mipmap levels, as a CUDA texture object
    (bilinear, the nearest level, clamped edges, normalised coordinates: GL's
    LINEAR_MIPMAP_NEAREST with CLAMP_TO_EDGE). Copied device to device through interop
    once, so no frame ever maps the GL texture; kernels sample it through the texture
    unit, whose filtering is the one GL's sampler uses on the same GPU."""

    def __init__(self, texture: int, width: int, height: int, levels: int, stream) -> None:
        from cuda.bindings import runtime

        texel = check(runtime.cudaCreateChannelDesc(
            8, 8, 8, 8, runtime.cudaChannelFormatKind.cudaChannelFormatKindUnsigned), "cudaCreateChannelDesc")
        self._array = check(runtime.cudaMallocMipmappedArray(
            texel, runtime.make_cudaExtent(width, height, 0), levels, 0), "cudaMallocMipmappedArray")
        resource = check(runtime.cudaGraphicsGLRegisterImage(
            texture, GL.GL_TEXTURE_2D, runtime.cudaGraphicsRegisterFlags.cudaGraphicsRegisterFlagsReadOnly),
            "cudaGraphicsGLRegisterImage")
        try:
            check(runtime.cudaGraphicsMapResources(1, resource, stream), "cudaGraphicsMapResources")
            try:
                source = check(runtime.cudaGraphicsResourceGetMappedMipmappedArray(resource),
                               "cudaGraphicsResourceGetMappedMipmappedArray")
                for level in range(levels):
                    w, h = max(1, width >> level), max(1, height >> level)
                    check(runtime.cudaMemcpy2DArrayToArray(
                        check(runtime.cudaGetMipmappedArrayLevel(self._array, level), "cudaGetMipmappedArrayLevel"),
                        0, 0, check(runtime.cudaGetMipmappedArrayLevel(source, level), "cudaGetMipmappedArrayLevel"),
                        0, 0, w * 4, h, runtime.cudaMemcpyKind.cudaMemcpyDeviceToDevice),
                        "cudaMemcpy2DArrayToArray")
            finally:
                check(runtime.cudaGraphicsUnmapResources(1, resource, stream), "cudaGraphicsUnmapResources")
        finally:
            runtime.cudaGraphicsUnregisterResource(resource)
        resource_description = runtime.cudaResourceDesc()
        resource_description.resType = runtime.cudaResourceType.cudaResourceTypeMipmappedArray
        resource_description.res.mipmap.mipmap = self._array
        sampling = runtime.cudaTextureDesc()
        clamp = runtime.cudaTextureAddressMode.cudaAddressModeClamp
        sampling.addressMode = [clamp, clamp, clamp]
        sampling.filterMode = runtime.cudaTextureFilterMode.cudaFilterModeLinear
        sampling.mipmapFilterMode = runtime.cudaTextureFilterMode.cudaFilterModePoint
        sampling.readMode = runtime.cudaTextureReadMode.cudaReadModeNormalizedFloat
        sampling.normalizedCoords = 1
        sampling.minMipmapLevelClamp = 0
        sampling.maxMipmapLevelClamp = float(levels - 1)
        self.handle = int(check(runtime.cudaCreateTextureObject(resource_description, sampling, None),
                                "cudaCreateTextureObject"))

    def release(self) -> None:
        from cuda.bindings import runtime

        runtime.cudaDestroyTextureObject(self.handle)
        runtime.cudaFreeMipmappedArray(self._array)


def upload(array: np.ndarray) -> int:
    """A device copy of `array` (one host→device copy); free it with `free`."""
    from cuda.bindings import runtime

    data = np.ascontiguousarray(array)
    pointer = check(runtime.cudaMalloc(data.nbytes), "cudaMalloc")
    check(runtime.cudaMemcpy(pointer, data.ctypes.data, data.nbytes,
                             runtime.cudaMemcpyKind.cudaMemcpyHostToDevice), "cudaMemcpy")
    return int(pointer)


def zeroed(nbytes: int, stream) -> int:
    """`nbytes` of device memory, zeroed on `stream` (no host copy): work queued on that
    stream after it sees zeros. (cudaMemset would zero on the legacy default stream, which
    a non-blocking stream does not wait for.) Free it with `free`."""
    from cuda.bindings import runtime

    pointer = check(runtime.cudaMalloc(nbytes), "cudaMalloc")
    check(runtime.cudaMemsetAsync(pointer, 0, nbytes, stream), "cudaMemsetAsync")
    return int(pointer)


def synchronize(stream) -> None:
    """Return once the work queued on `stream` is done: for timing it (the render thread
    never waits for the device)."""
    from cuda.bindings import runtime

    check(runtime.cudaStreamSynchronize(stream), "cudaStreamSynchronize")


def free(pointer: int) -> None:
    from cuda.bindings import runtime

    runtime.cudaFree(pointer)
