"""Which of the two frame-rate settings applies on this computer, said beside each:
`target_fps` where OpenGL draws on a GPU, `software_gl_fps` (at most) where it draws on
the CPU, as the studio chooses at start (app/studio.py); both take effect at restart."""

from __future__ import annotations

from functools import cache

from render.gl.offscreen import OffscreenError, gl_renderer, renders_on_cpu

RESTART = "A change takes effect when the app restarts."


@cache
def this_renderer() -> str | None:
    """This process's GL_RENDERER, asked once (a context is made for it); None where
    OpenGL cannot say."""
    try:
        return gl_renderer()
    except OffscreenError:
        return None


def hints(target_fps: int, software_gl_fps: int, shown_fps: int | None) -> tuple[str, str]:
    """(beside the frame rate, beside the software-OpenGL one) for the values in the
    fields; `shown_fps` is the rate the avatar is drawn at now (None: not known)."""
    renderer = this_renderer()
    now = f" The avatar is drawn at {shown_fps} fps now." if shown_fps is not None else ""
    if renderer is None:
        return (f"Where OpenGL draws on a GPU. {RESTART}",
                f"At most this where OpenGL draws on the CPU (no GPU driver). {RESTART}")
    if not renders_on_cpu(renderer):
        return (f"Applies here: OpenGL draws on a GPU ({renderer}).{now} {RESTART}",
                "Not used here: only where OpenGL draws on the CPU (no GPU driver).")
    software = f"OpenGL draws on the CPU here ({renderer})"
    if software_gl_fps >= target_fps:
        return (f"Applies here: {software}, and the rate below is not lower.{now} {RESTART}",
                f"Not lower than the rate above, so that one applies. {RESTART}")
    return (f"Not used here: {software}, so the rate below applies.",
            f"Applies here: {software}; the voice and the microphone need the CPU too.{now} "
            f"{RESTART}")
