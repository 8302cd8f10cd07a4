"""Which window system this process's OpenGL goes through, chosen before anything
imports PyOpenGL (it binds its entry points once, at first import). Imports nothing
of GL or Qt, so it can run first."""

from __future__ import annotations

import ctypes
import os
import sys

# What PyOpenGL's EGL platform loads (OpenGL/platform/egl.py): libEGL, and libOpenGL for
# the GL entry points (it falls back to GLES, which has none of desktop GL's).
EGL_LIBRARIES = ("EGL", "OpenGL")
# What to do where EGL gives no OpenGL: the packages named are Debian's and Ubuntu's.
INSTALL_HINT = ("install the GPU's OpenGL driver, or Mesa's EGL to render on the CPU "
                "(Debian/Ubuntu: libegl1 libopengl0 libegl-mesa0 libgl1-mesa-dri)")


def use_egl() -> bool:
    """Make this process's PyOpenGL use EGL, which needs no display (render/gl/
    egl_target.py picks a GPU or Mesa's surfaceless platform); False if OpenGL was
    already imported for another platform (then it is too late, and nothing is changed)."""
    if "OpenGL" in sys.modules and os.environ.get("PYOPENGL_PLATFORM") != "egl":
        return False
    os.environ["PYOPENGL_PLATFORM"] = "egl"
    return True


def missing_egl_libraries() -> list[str]:
    """The libraries of EGL_LIBRARIES that cannot be loaded here, e.g. ["libEGL"]: where
    one is missing, PyOpenGL's EGL platform fails on its first GL import with an
    AttributeError that says nothing of what to install."""
    return [f"lib{name}" for name in EGL_LIBRARIES if not _loads(name)]


def _loads(name: str) -> bool:
    # The file names PyOpenGL tries (ctypesloader._loadLibraryPosix), in its order.
    for filename in (f"lib{name}.so", *(f"lib{name}.so.{n}" for n in range(9, -1, -1))):
        try:
            ctypes.CDLL(filename, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        return True
    return False
