"""Float32 matrices in device memory that one engine's run writes and another's reads,
without the host: the voice's latents stay on the GPU between the flow and the vocoder.

Copies go on CUDA's legacy default stream, and each batch of them is waited for before
the next run is launched. Why that stream: onnxruntime's runs end with their device
work done (its own device-to-host copies of their outputs, on that same stream, are
read at once by the host), and whether its stream is blocking or not, a copy queued on
the legacy stream after a run's return and synchronized before the next run is ordered
after the one and before the other.

The calls go to libcudart through ctypes.PyDLL, which keeps the GIL through each call.
They are made on the device's thread between runs, and each returns within microseconds
(a copy or a zeroing queued, or a wait for such copies). cuda.bindings lets the GIL go
for every call, and a thread that lets it go while other threads run Python waits up to
Python's switch interval (5 ms) to have it back: 65 calls beside 8 busy Python threads
took 18.0 ms P50 (151.5 ms at worst) through cuda.bindings on the 2-vCPU VM, 0.014 ms
through PyDLL (bench/gil_calls.py, bench/results/gil_calls_2vcpu_xeon.json). A vocoder
batch of 64 streams makes up to 129 of them.

The library is loaded on first use, so this module loads where CUDA is not installed
(the CPU never calls it).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import numpy as np

_FLOAT = np.dtype(np.float32).itemsize
_LEGACY_STREAM = None  # cudaStream_t 0: the legacy default stream
_MEMCPY_DEVICE_TO_DEVICE = 3  # cudaMemcpyKind


class CudaError(RuntimeError):
    """A CUDA call failed; the message names the call and the error."""


_LOADED: list[ctypes.PyDLL] = []
_LOADING = threading.Lock()


def cudart() -> ctypes.PyDLL:
    """libcudart, its calls keeping the GIL: the one already loaded in the process (by
    onnxruntime's CUDA provider), else the one cuda.pathfinder finds (the
    nvidia-cuda-runtime package, or the system's CUDA). CudaError where there is none."""
    with _LOADING:
        if not _LOADED:
            from cuda.pathfinder import DynamicLibNotFoundError, load_nvidia_dynamic_lib

            try:
                path = load_nvidia_dynamic_lib("cudart").abs_path
            except DynamicLibNotFoundError as exc:
                raise CudaError(f"no CUDA runtime library (libcudart) was found: {exc}") from exc
            library = ctypes.PyDLL(path)
            size, pointer = ctypes.c_size_t, ctypes.c_void_p
            for name, arguments in (
                    ("cudaMemcpy2DAsync", [pointer, size, pointer, size, size, size,
                                           ctypes.c_int, pointer]),
                    ("cudaMemset2DAsync", [pointer, size, ctypes.c_int, size, size, pointer]),
                    ("cudaStreamSynchronize", [pointer])):
                function = getattr(library, name)
                function.argtypes, function.restype = arguments, ctypes.c_int
            library.cudaGetErrorName.argtypes = [ctypes.c_int]
            library.cudaGetErrorName.restype = ctypes.c_char_p
            _LOADED.append(library)
        return _LOADED[0]


def _checked(library: ctypes.PyDLL, error: int, call: str) -> None:
    if error:
        name = (library.cudaGetErrorName(error) or b"unknown error").decode(errors="replace")
        raise CudaError(f"{call} failed: {name} ({error})")


def check(result, call: str):
    """The value(s) of a cuda-python call, or CudaError naming `call` and the error."""
    err, *values = result
    if int(err) != 0:
        raise CudaError(f"{call} failed: {err!r}")
    if not values:
        return None
    return values[0] if len(values) == 1 else values


@dataclass(frozen=True, slots=True)
class Copy2D:
    """One strided copy: `height` rows of `width` bytes, `dst`/`src` rows `dpitch`/`spitch`
    bytes apart (cudaMemcpy2DAsync's arguments)."""

    dst: int
    dpitch: int
    src: int
    spitch: int
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class DeviceColumns:
    """Columns [start, start + width) of the row-major float32 matrix at `pointer` on the
    device (`rows` rows of `pitch` columns); of them, the first `valid` hold data and the
    rest read as zeros. Shaped (1, rows, width), a batch of one, as an engine's input is.

    Valid until the matrix is written or let go: an engine reads it on the device's
    thread while the stream that made it waits for the run."""

    pointer: int
    rows: int
    pitch: int
    start: int
    width: int
    valid: int

    @property
    def shape(self) -> tuple[int, int, int]:
        return (1, self.rows, self.width)

    def columns(self, start: int, width: int) -> DeviceColumns:
        """Columns [start, start + width) of these, all valid."""
        return DeviceColumns(self.pointer, self.rows, self.pitch, self.start + start, width, width)

    def plan(self, pointer: int, pitch: int, at: int = 0) -> tuple[Copy2D | None, Copy2D | None]:
        """The copy of these columns into the matrix at `pointer` (`pitch` columns a row,
        as many rows) from its column `at`, and the zeroing after them (as a Copy2D whose
        `src` is unused): None for either that has nothing to do."""
        valid = max(0, min(self.valid, self.width))
        copy = (Copy2D(pointer + at * _FLOAT, pitch * _FLOAT,
                       self.pointer + self.start * _FLOAT, self.pitch * _FLOAT,
                       valid * _FLOAT, self.rows) if valid else None)
        zeros = (Copy2D(pointer + (at + valid) * _FLOAT, pitch * _FLOAT, 0, 0,
                        (self.width - valid) * _FLOAT, self.rows) if valid < self.width else None)
        return copy, zeros

    def copy_to(self, pointer: int, pitch: int, at: int = 0) -> None:
        """Queue `plan`'s copy and zeroing; `synchronize` waits for them."""
        library = cudart()
        copy, zeros = self.plan(pointer, pitch, at)
        if copy is not None:
            _checked(library, library.cudaMemcpy2DAsync(
                copy.dst, copy.dpitch, copy.src, copy.spitch, copy.width, copy.height,
                _MEMCPY_DEVICE_TO_DEVICE, _LEGACY_STREAM), "cudaMemcpy2DAsync")
        if zeros is not None:
            _checked(library, library.cudaMemset2DAsync(
                zeros.dst, zeros.dpitch, 0, zeros.width, zeros.height, _LEGACY_STREAM),
                "cudaMemset2DAsync")


class DeviceMatrix:
    """A `rows` x `columns` float32 matrix of device memory (onnxruntime's allocator:
    freed when the matrix is), its contents undefined until written."""

    def __init__(self, rows: int, columns: int) -> None:
        import onnxruntime

        self.rows, self.columns = rows, columns
        self._value = onnxruntime.OrtValue.ortvalue_from_shape_and_type(
            [rows, columns], np.float32, "cuda", 0)
        self.pointer: int = self._value.data_ptr()

    def columns_of(self, start: int, width: int, valid: int) -> DeviceColumns:
        return DeviceColumns(self.pointer, self.rows, self.columns, start, width, valid)


def synchronize() -> None:
    """Return once every copy queued here is done."""
    library = cudart()
    _checked(library, library.cudaStreamSynchronize(_LEGACY_STREAM), "cudaStreamSynchronize")
