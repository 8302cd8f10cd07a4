"""Where an X11 window's picture is on its screen, through `xwininfo` (x11-utils): for the
screen-capture fallback, which crops the screen to the avatar window."""

from __future__ import annotations

import os
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


def _xwininfo(args: list[str], display: str) -> dict[str, int]:
    if shutil.which("xwininfo") is None:
        raise GeometryError("xwininfo is not installed (Debian/Ubuntu: apt install x11-utils)")
    try:
        done = subprocess.run(["xwininfo", "-display", display, *args], capture_output=True,
                              text=True, timeout=5)
    except subprocess.TimeoutExpired:
        raise GeometryError(f"the X display {display} did not answer within 5 s") from None
    if "unable to open display" in done.stderr:
        raise GeometryError(f"cannot open the X display {display}, where the avatar window is "
                            "(run this from a terminal of that desktop)")
    if done.returncode != 0:
        raise GeometryError(f"xwininfo {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    fields = dict(re.findall(r"^\s*(Absolute upper-left [XY]|Width|Height):\s*(-?\d+)", done.stdout, re.M))
    return {key: int(value) for key, value in fields.items()}


def window_geometry(window_id: int, display: str | None = None) -> Geometry:
    """The geometry of X11 window ``window_id`` on X display ``display`` (None: this
    process's DISPLAY); GeometryError says what is missing."""
    display = display or os.environ.get("DISPLAY")
    if not display:
        raise GeometryError("it needs the X display the avatar window is on, and this terminal "
                            "has none (DISPLAY is not set, as over ssh): run this from a terminal "
                            "of the desktop the app runs on, or press Add to OBS in the app's "
                            "settings")
    window = _xwininfo(["-id", str(window_id)], display)
    root = _xwininfo(["-root"], display)
    try:
        return Geometry(window["Absolute upper-left X"], window["Absolute upper-left Y"],
                        window["Width"], window["Height"], root["Width"], root["Height"])
    except KeyError as exc:
        raise GeometryError(f"xwininfo's answer has no {exc.args[0]!r}") from None
