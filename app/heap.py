"""What the process holds on its heaps, by the interpreter's and the C library's own
counts: for the API's status, so a long run (bench/soak.py) can tell a growing heap from
pages the allocator keeps (RSS alone cannot).

- `python_blocks`: the interpreter's live memory blocks (sys.getallocatedblocks): every
  Python object and buffer it allocated and has not freed, counted, not sized;
- `malloc_mb`: bytes in use from glibc's malloc (mallinfo2: its arenas and its mmapped
  chunks), where Python's larger objects, numpy's arrays, onnxruntime, Qt and Mesa
  allocate. None where the C library has no mallinfo2 (not glibc, or before 2.33).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys


class _Mallinfo2(ctypes.Structure):
    # glibc's struct mallinfo2 (malloc.h, 2.33 and later): ten size_t fields.
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _mallinfo2():
    name = ctypes.util.find_library("c")
    try:
        function = ctypes.CDLL(name).mallinfo2 if name else None
    except (OSError, AttributeError):
        return None
    if function is not None:
        function.restype = _Mallinfo2
        function.argtypes = []
    return function


_MALLINFO2 = _mallinfo2()


def heap_figures() -> dict[str, float | int | None]:
    """The heaps now: {"python_blocks": int, "malloc_mb": float or None}."""
    malloc_mb = None
    if _MALLINFO2 is not None:
        info = _MALLINFO2()
        # uordblks: allocated from the arenas; hblkhd: the chunks malloc mmapped whole.
        malloc_mb = (info.uordblks + info.hblkhd) / 2**20
    return {"python_blocks": sys.getallocatedblocks(), "malloc_mb": malloc_mb}
