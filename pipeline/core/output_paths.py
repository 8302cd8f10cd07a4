"""Whether a file can be written at a path: the one check every output goes through
(the command line's --wav, --cues and --out, the video export), made before any slow
work so that a typo costs no synthesis and leaves no half-written file. No Qt here:
`say` and `lipsync` check their outputs without loading the renderer.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class OutputPathError(Exception):
    """No file can be written at ``path``; ``reason`` says why. The message is one
    line for the user: ``cannot write PATH: REASON``."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot write {path}: {reason}")
        self.path = path
        self.reason = reason


def check_output_path(path: Path) -> None:
    """OutputPathError unless a file can be written at ``path``: it is no folder, its
    folder exists and is a folder, an existing file there is writable, and a file can be
    created beside it. The last is checked by creating one (removed at once): as root
    os.access says yes to a folder such as /proc, where nothing can be made."""
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(path, "it is a folder")
    folder = path.resolve().parent
    if not folder.exists():
        raise OutputPathError(path, f"folder {folder} does not exist")
    if not folder.is_dir():
        raise OutputPathError(path, f"{folder} is not a folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputPathError(path, "permission denied")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}."):
            pass
    except OSError as exc:
        raise OutputPathError(path, f"no file can be created in {folder} "
                                    f"({exc.strerror})") from None
