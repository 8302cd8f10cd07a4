"""What the process holds on its heaps, by the interpreter's and the C library's own
counts: for the API's status, so a long run (bench/soak.py) can tell a growing heap from
pages the allocator keeps (RSS alone cannot). And, once the app is up, its long-lived
objects kept out of the garbage collector's full passes (`freeze_long_lived`), and from
its start large blocks kept out of malloc's arenas (`keep_large_blocks_apart`).

- `python_blocks`: the interpreter's live memory blocks (sys.getallocatedblocks): every
  Python object and buffer it allocated and has not freed, counted, not sized;
- `malloc_mb`: bytes in use from glibc's malloc (mallinfo2: its arenas and its mmapped
  chunks), where Python's larger objects, numpy's arrays, onnxruntime, Qt and Mesa
  allocate. None where the C library has no mallinfo2 (not glibc, or before 2.33);
- `malloc_free_mb`: bytes free inside malloc's arenas, kept from the system (fordblks):
  what RSS holds beyond `malloc_mb` because of the allocator, not the app.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import sys

log = logging.getLogger(__name__)


class _Mallinfo2(ctypes.Structure):
    # glibc's struct mallinfo2 (malloc.h, 2.33 and later): ten size_t fields.
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _libc_function(name: str, restype, argtypes: list):
    """The C library's function `name`, typed; None where there is none (not glibc, or
    a glibc too old for it)."""
    library = ctypes.util.find_library("c")
    try:
        function = getattr(ctypes.CDLL(library), name) if library else None
    except (OSError, AttributeError):
        return None
    if function is not None:
        function.restype = restype
        function.argtypes = argtypes
    return function


_MALLINFO2 = _libc_function("mallinfo2", _Mallinfo2, [])

# mallopt's parameter numbers (glibc's malloc.h).
_M_MMAP_THRESHOLD = -3
# glibc's own starting value (malloc.h DEFAULT_MMAP_THRESHOLD_MIN), kept fixed.
MMAP_THRESHOLD_BYTES = 128 * 1024


def keep_large_blocks_apart() -> bool:
    """Have every malloc block of MMAP_THRESHOLD_BYTES or more mapped on its own and given
    back to the system when freed, for the whole run; False where the C library is not
    glibc. Left to itself, glibc raises the threshold to the size of each mapped block
    freed (up to 32 MB): after the first avatar switch freed a rig's images, the next
    rig's images, the photo mesh and the voice's buffers came from the arenas, which keep
    what is freed in pieces. That is RSS growing while the bytes in use do not: in the
    10-minute soak (bench/results/soak_10min_vm_2core_epyc_shared.json) RSS rose 1006 ->
    1042 MB with malloc's bytes in use flat (615-700 MB, by which avatar was shown).
    The blocks this maps are none on the frame path (it allocates nothing per tick)."""
    mallopt = _libc_function("mallopt", ctypes.c_int, [ctypes.c_int, ctypes.c_int])
    if mallopt is None:
        log.info("malloc's large blocks are left to the C library's own rule: it has no mallopt")
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def freeze_long_lived() -> None:
    """Move every object alive now out of the garbage collector's passes, once per
    process, after a full collection (so nothing dead is kept): for the app's entry
    points once its voice is ready, when what lives for the whole run exists (models,
    Qt's wrappers, rigs, settings). A full collection walked them all: 75 ms on the GUI
    thread in the running app on the 2-core VM (130,000 objects), a stall of 4 ticks at
    60 fps each time one ran (bench/soak.py saw them as busy stalls); with them frozen,
    well under a millisecond. Frozen objects are still freed by reference counting; only
    a cycle among them is never collected."""
    if gc.get_freeze_count():
        return
    gc.collect()
    gc.freeze()


def heap_figures() -> dict[str, float | int | None]:
    """The heaps now: {"python_blocks": int, "malloc_mb": float or None, "malloc_free_mb":
    float or None, "frozen_objects": int (freeze_long_lived's)}."""
    malloc_mb = malloc_free_mb = None
    if _MALLINFO2 is not None:
        info = _MALLINFO2()
        # uordblks: allocated from the arenas; hblkhd: the chunks malloc mmapped whole.
        malloc_mb = (info.uordblks + info.hblkhd) / 2**20
        malloc_free_mb = info.fordblks / 2**20
    return {"python_blocks": sys.getallocatedblocks(), "malloc_mb": malloc_mb,
            "malloc_free_mb": malloc_free_mb, "frozen_objects": gc.get_freeze_count()}
