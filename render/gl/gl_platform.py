"""Which window system this process's OpenGL goes through, chosen before anything
imports PyOpenGL (it binds its entry points once, at first import). Imports nothing
of GL or Qt, so it can run first."""

from __future__ import annotations

import os
import sys


def use_egl() -> bool:
    """Make this process's PyOpenGL use EGL without a display; False if OpenGL was already
    imported for another platform (then it is too late, and nothing is changed)."""
    if "OpenGL" in sys.modules and os.environ.get("PYOPENGL_PLATFORM") != "egl":
        return False
    os.environ["PYOPENGL_PLATFORM"] = "egl"
    # Mesa: with no display to go by, the surfaceless platform (rendering into FBOs only).
    os.environ.setdefault("EGL_PLATFORM", "surfaceless")
    return True
