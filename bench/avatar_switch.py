"""What showing a freshly read avatar costs each output on the GUI thread: the
renderer's set_rig (its textures) and the first frame drawn with them, GPU-complete
(glFinish), for the bundled sprite avatar and a photo avatar (the test harness's drawn
portrait, --photo-px wide, saved as an import is), each read as the app's avatar reader
reads it (app.avatar_library.read_avatar, which readies the rig off the GUI thread). The
app does this once per output (its view, the avatar window, the browser source's and
virtual camera's feeds) at every avatar switch.

Baseline in the same run: the sprite and photo renderers and their shaders as committed
at --previous REV, interleaved with the current ones, each rig readied as that
revision's reader readied it.

Usage: python bench/avatar_switch.py [--switches 40] [--size 512] [--photo-px 1024]
                                     [--previous REV] [--out F]
Last line of output: one JSON object.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.gl_session import gl_session  # noqa: E402
from bench.machine import describe, publish  # noqa: E402
from bench.render import gl_module_at  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--switches", type=int, default=40)
    parser.add_argument("--size", type=int, default=512, help="the output's size in pixels (square)")
    parser.add_argument("--photo-px", type=int, default=1024, help="the photo avatar's picture size")
    parser.add_argument("--previous", metavar="REV", default="a03aee8")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    with gl_session("avatar-switch-bench") as gl:
        result = _measure(args, gl)
    publish(result, args.out)
    return 0


def _measure(args, gl: str) -> dict:
    import tempfile

    from app.avatar_library import read_avatar
    from render.gl import photo_renderer, sprite_renderer
    from render.rigs.loader import load_avatar_rig
    from render.rigs.photo_manifest import save_photo_rig
    from tests.harness.drawn_portrait import drawn_portrait

    sprite_then, sprite_shaders = gl_module_at(args.previous, "sprite_renderer")
    photo_then, photo_shaders = gl_module_at(args.previous, "photo_renderer")
    photo = save_photo_rig(drawn_portrait(size=args.photo_px), Path(tempfile.mkdtemp()) / "photo")

    def sprite_read_then():
        rig = read_avatar(None)
        sprite_then.premultiply_rig(rig)  # what that revision's reader did
        return rig

    return {"bench": "avatar_switch", "machine": describe(f"Xvfb + {gl}"),
            "output_px": args.size, "switches": args.switches, "previous_revision": args.previous,
            "timing": "set_rig and the first frame, GPU-complete (glFinish), P50 and max",
            "bundled_sprite": _switches(
                {"current": (sprite_renderer.SpriteGLRenderer(), lambda: read_avatar(None)),
                 "previous": (sprite_then.SpriteGLRenderer(shaders_dir=sprite_shaders), sprite_read_then)},
                args),
            # That revision's reader made nothing ahead for a photo rig.
            f"photo_{args.photo_px}px": _switches(
                {"current": (photo_renderer.PhotoRenderer(), lambda: read_avatar(str(photo))),
                 "previous": (photo_then.PhotoRenderer(shaders_dir=photo_shaders),
                              lambda: load_avatar_rig(photo))},
                args)}


def _switches(cases: dict, args) -> dict:
    """Per case name, (renderer, read: a fresh rig as the app's reader gives it): the
    renderer shown a fresh rig `args.switches` times, the cases interleaved."""
    from OpenGL import GL

    from pipeline.core.frames import MouthPose
    from render.gl.offscreen import OffscreenTarget

    times: dict[str, list[float]] = {name: [] for name in cases}
    with OffscreenTarget(args.size, args.size):
        for renderer, _ in cases.values():
            renderer.initialize()
            renderer.resize(args.size, args.size)
        # One switch uncounted each: the first upload pays for the driver's own set-up.
        for k in range(args.switches + 1):
            for name in (list(cases) if k % 2 else list(cases)[::-1]):
                renderer, read = cases[name]
                rig = read()
                GL.glFinish()
                started = time.perf_counter()
                renderer.set_rig(rig)
                renderer.draw(MouthPose(0, 0, 1.0, 0.5), 0.0, 0.0)
                GL.glFinish()
                if k:
                    times[name].append(time.perf_counter() - started)
        for renderer, _ in cases.values():
            renderer.release()
    out = {name: {"p50_ms": round(float(np.percentile(t, 50)) * 1000, 2),
                  "max_ms": round(max(t) * 1000, 2)} for name, t in times.items()}
    out["previous_over_current_p50"] = round(out["previous"]["p50_ms"] / out["current"]["p50_ms"], 2)
    return out


if __name__ == "__main__":
    sys.exit(main())
