"""A disk that fills up for real: a small tmpfs mounted for a test, so that writes fail as
on a full disk, with ENOSPC from the kernel ("No space left on device"), for every process
that writes there (the app in a process of its own too).

Mounting needs the right to (root, as the test machines and CI run the suite); without it
DiskUnavailable says why, and the tests that need a full disk are skipped with that.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class DiskUnavailable(RuntimeError):
    """No small disk can be mounted here."""


@contextmanager
def small_disk(path: Path, size_kib: int) -> Iterator[Path]:
    """A tmpfs of `size_kib` KiB at `path` for the block; unmounted after it."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "lipsync-test",
                              str(path)], capture_output=True, text=True)
    if mounted.returncode != 0:
        raise DiskUnavailable(f"a small disk cannot be mounted here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        # Lazily: a process of the test may still hold a file there as it ends.
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(disk: Path) -> Path:
    """Write a file on `disk` until it is full; the file (remove it to free the disk)."""
    filler = disk / "filler"
    block = b"\0" * 4096
    with open(filler, "wb", buffering=0) as file:
        try:
            while True:
                file.write(block)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        # The last part of a page a smaller write could still take.
        try:
            while True:
                file.write(b"\0")
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return filler


def free_bytes(disk: Path) -> int:
    stat = os.statvfs(disk)
    return stat.f_bavail * stat.f_frsize
