"""The running app's record, `config_dir()/running.json`: what `obs setup` run from a
terminal needs to configure OBS for the app that is running now.

The app writes it at start and whenever one of its values changes, and removes it at exit.
Invariant: `read_running_app()` returns a record only while the process that wrote it is
alive; a file left by a crash (its pid gone) reads as None. A pid reused by another process
since would read as alive: the record carries no start time to tell them apart.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from app.config_files import write_json
from app.settings import config_dir

# Every record has exactly these keys (write_running_app fills in pid when left out).
# "display": the X display the app's windows are on (None: none), for the screen-capture
# fallback's look at the avatar window from a terminal without DISPLAY (an ssh session).
KEYS = ("pid", "avatar_window_title", "avatar_window_on_top", "display", "output_background",
        "chroma_colour", "browser_source_url", "mic_sync_offset_ms", "latency_mode")


def running_app_path() -> Path:
    return config_dir() / "running.json"


def write_running_app(info: dict[str, Any]) -> None:
    """Write the record atomically (a reader never sees half a file). ``info`` has the
    keys of KEYS; ``pid`` defaults to this process. ValueError names missing or unknown
    keys: a misspelt key must not silently drop a value `obs setup` relies on."""
    record = {"pid": os.getpid(), **info}
    missing = [key for key in KEYS if key not in record]
    unknown = [key for key in record if key not in KEYS]
    if missing or unknown:
        raise ValueError(f"running-app record: missing {missing}, unknown {unknown}")
    # One way to write the app's files: on a full disk this left its temporary file.
    write_json(running_app_path(), record)


def read_running_app() -> dict[str, Any] | None:
    """The record of the app running now, or None: no file, an unreadable or malformed
    one, or one whose process is gone."""
    try:
        record = json.loads(running_app_path().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(record, dict) or any(key not in record for key in KEYS):
        return None
    pid = record["pid"]
    if not isinstance(pid, int) or isinstance(pid, bool) or not process_alive(pid):
        return None
    return record


def remove_running_app() -> None:
    """Remove the record at exit, if it is this process's (not another instance's)."""
    path = running_app_path()
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        pass


def process_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if os.name == "nt":
        # os.kill(pid, 0) would send CTRL_C_EVENT on Windows: ask for the exit code instead.
        import ctypes

        kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
        handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not handle:
            return False
        code = ctypes.c_ulong()
        try:
            return bool(kernel32.GetExitCodeProcess(handle, ctypes.byref(code))) and code.value == 259
        finally:
            kernel32.CloseHandle(handle)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True
