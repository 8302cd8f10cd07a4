"""The heaps as the API's status reports them, and the long-lived objects frozen out of
the garbage collector's passes (app/heap.py)."""

from __future__ import annotations

import gc
import time

import numpy as np

from app.heap import freeze_long_lived, heap_figures


def _full_collection_s() -> float:
    started = time.perf_counter()
    gc.collect()
    return time.perf_counter() - started


def test_the_heaps_count_what_is_allocated():
    gc.collect()  # no garbage of earlier tests freed meanwhile, by a collection this starts
    gc.disable()
    try:
        before = heap_figures()
        kept = [[i] for i in range(100_000)], np.ones(10 * 2**20 // 8)  # small objects, 10 MiB
        after = heap_figures()
    finally:
        gc.enable()
    assert after["python_blocks"] - before["python_blocks"] >= 100_000
    assert after["malloc_mb"] - before["malloc_mb"] >= 10 - 0.5
    del kept


def test_frozen_objects_are_not_walked_by_a_full_collection_and_still_freed():
    gc.unfreeze()  # this test process's own state: the app freezes once, at its start
    try:
        long_lived = [[i] for i in range(300_000)]  # the running app had 130,000 tracked
        walked = min(_full_collection_s() for _ in range(3))
        freeze_long_lived()
        assert gc.get_freeze_count() > len(long_lived)
        frozen = min(_full_collection_s() for _ in range(3))
        # A full pass walks every tracked object; frozen ones are not tracked by it.
        assert frozen < walked / 10, (walked, frozen)
        freeze_long_lived()  # once a process: nothing more is frozen
        blocks = heap_figures()["python_blocks"]
        del long_lived  # reference counting still frees frozen objects
        assert heap_figures()["python_blocks"] < blocks - 300_000
    finally:
        gc.unfreeze()


_AFTER_A_LARGE_FREE = """
import sys, numpy as np
from app.heap import _MALLINFO2, keep_large_blocks_apart
if sys.argv[1] == "apart":
    assert keep_large_blocks_apart()
big = np.ones(4 * 2**20 // 8)  # mapped whole (over glibc's starting threshold of 128 KiB)
del big                        # glibc alone now raises its threshold to 4 MiB
before = _MALLINFO2().hblkhd
block = np.ones(2**20 // 8)    # 1 MiB: mapped on its own, or cut from an arena
print(_MALLINFO2().hblkhd - before)
"""


def test_large_blocks_stay_mapped_after_a_larger_one_is_freed():
    import subprocess
    import sys
    from pathlib import Path

    def mapped_bytes(mode: str) -> int:
        child = subprocess.run([sys.executable, "-c", _AFTER_A_LARGE_FREE, mode],
                               capture_output=True, text=True, check=True,
                               cwd=Path(__file__).resolve().parent.parent)
        return int(child.stdout)

    # The mechanism keep_large_blocks_apart stops: after a mapped block is freed, glibc
    # alone serves blocks under its size from the arenas, where what is freed stays.
    assert mapped_bytes("alone") == 0
    assert mapped_bytes("apart") >= 2**20
