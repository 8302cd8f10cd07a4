"""Where an X11 window's picture is on its screen, through `xwininfo` (x11-utils): for the
screen-capture fallback, which crops the screen to the avatar window."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass


class GeometryError(Exception):
    """The window's place could not be found; the message says why."""


@dataclass(frozen=True)
class Geometry:
    """The window's client area (no frame) in root-window pixels, and the root's size."""

    x: int
    y: int
    width: int
    height: int
    root_width: int
    root_height: int


def _xwininfo(args: list[str]) -> dict[str, int]:
    if shutil.which("xwininfo") is None:
        raise GeometryError("xwininfo is not installed (Debian/Ubuntu: apt install x11-utils)")
    try:
        done = subprocess.run(["xwininfo", *args], capture_output=True, text=True, timeout=5)
    except subprocess.TimeoutExpired:
        raise GeometryError("xwininfo did not answer within 5 s") from None
    if done.returncode != 0:
        raise GeometryError(f"xwininfo {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    fields = dict(re.findall(r"^\s*(Absolute upper-left [XY]|Width|Height):\s*(-?\d+)", done.stdout, re.M))
    return {key: int(value) for key, value in fields.items()}


def window_geometry(window_id: int) -> Geometry:
    """The geometry of X11 window ``window_id`` on this process's DISPLAY."""
    window = _xwininfo(["-id", str(window_id)])
    root = _xwininfo(["-root"])
    try:
        return Geometry(window["Absolute upper-left X"], window["Absolute upper-left Y"],
                        window["Width"], window["Height"], root["Width"], root["Height"])
    except KeyError as exc:
        raise GeometryError(f"xwininfo's answer has no {exc.args[0]!r}") from None
