"""Float32 matrices in device memory that one engine's run writes and another's reads,
without the host: the voice's latents stay on the GPU between the flow and the vocoder.

Copies go on CUDA's legacy default stream, and each batch of them is waited for before
the next run is launched. Why that stream: onnxruntime's runs end with their device
work done (its own device-to-host copies of their outputs, on that same stream, are
read at once by the host), and whether its stream is blocking or not, a copy queued on
the legacy stream after a run's return and synchronized before the next run is ordered
after the one and before the other.

Imports of cuda.bindings stay inside the functions, so this module loads where it is
not installed (the CPU never calls them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_FLOAT = np.dtype(np.float32).itemsize
_LEGACY_STREAM = 0


class CudaError(RuntimeError):
    """A CUDA call failed; the message names the call and the error."""


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
        from cuda.bindings import runtime

        copy, zeros = self.plan(pointer, pitch, at)
        if copy is not None:
            check(runtime.cudaMemcpy2DAsync(
                copy.dst, copy.dpitch, copy.src, copy.spitch, copy.width, copy.height,
                runtime.cudaMemcpyKind.cudaMemcpyDeviceToDevice, _LEGACY_STREAM),
                "cudaMemcpy2DAsync")
        if zeros is not None:
            check(runtime.cudaMemset2DAsync(zeros.dst, zeros.dpitch, 0, zeros.width, zeros.height,
                                            _LEGACY_STREAM), "cudaMemset2DAsync")


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
    from cuda.bindings import runtime

    check(runtime.cudaStreamSynchronize(_LEGACY_STREAM), "cudaStreamSynchronize")
