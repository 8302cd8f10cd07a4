"""The app's own files in its config folder (settings, API tokens, VTube Studio's token),
read and written one way.

A save never leaves a broken file: the new text goes to a temporary file beside the old
one, is flushed to the disk, and replaces the old one in one rename, so a reader (or the
app after a crash or a kill mid-save) finds the old file or the new one, whole. A save
that fails (a full disk, no permission) raises OSError and leaves the old file as it
was, so nothing that was saved before is lost.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pipeline.core.json_text import parse_json


def write_text_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    write_text_atomically(path, json.dumps(data, indent=2) + "\n")


def read_json(path: Path) -> Any:
    """The file's JSON, or None where there is none or it is unreadable (whoever reads it
    decides what that means: the settings store keeps a broken file aside)."""
    try:
        return parse_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # ValueError: not UTF-8, or not JSON
        return None
