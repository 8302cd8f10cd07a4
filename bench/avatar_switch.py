"""What showing a freshly read sprite avatar costs each output on the GUI thread: the
renderer's set_rig (its textures) and the first frame drawn with them, GPU-complete
(glFinish), for the bundled avatar read as the app's avatar reader reads it
(app.avatar_library.read_avatar, which readies the rig off the GUI thread). The app
does this once per output (its view, the avatar window, the browser source's and
virtual camera's feeds) at every avatar switch.

Baseline in the same run: the sprite renderer and its shaders as committed at
--previous REV, interleaved with the current one, each rig readied as that revision's
reader readied it.

Usage: python bench/avatar_switch.py [--switches 40] [--size 512] [--previous REV] [--out F]
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
    parser.add_argument("--previous", metavar="REV", default="a03aee8")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    with gl_session("avatar-switch-bench") as gl:
        result = _measure(args, gl)
    publish(result, args.out)
    return 0


def _measure(args, gl: str) -> dict:
    from OpenGL import GL

    from app.avatar_library import read_avatar
    from pipeline.core.frames import MouthPose
    from render.gl import sprite_renderer
    from render.gl.offscreen import OffscreenTarget

    previous, previous_shaders = gl_module_at(args.previous, "sprite_renderer")
    times: dict[str, list[float]] = {"current": [], "previous": []}
    with OffscreenTarget(args.size, args.size):
        renderers = {"current": sprite_renderer.SpriteGLRenderer(),
                     "previous": previous.SpriteGLRenderer(shaders_dir=previous_shaders)}
        for renderer in renderers.values():
            renderer.initialize()
            renderer.resize(args.size, args.size)
        # One switch uncounted each: the first upload pays for the driver's own set-up.
        for k in range(args.switches + 1):
            for name in (("current", "previous") if k % 2 else ("previous", "current")):
                rig = read_avatar(None)
                if name == "previous":
                    previous.premultiply_rig(rig)  # what that revision's reader did
                renderer = renderers[name]
                GL.glFinish()
                started = time.perf_counter()
                renderer.set_rig(rig)
                renderer.draw(MouthPose(0, 0, 1.0, 0.5), 0.0, 0.0)
                GL.glFinish()
                if k:
                    times[name].append(time.perf_counter() - started)
        for renderer in renderers.values():
            renderer.release()
    stats = {name: {"p50_ms": round(float(np.percentile(t, 50)) * 1000, 2),
                    "max_ms": round(max(t) * 1000, 2)} for name, t in times.items()}
    return {"bench": "avatar_switch", "machine": describe(f"Xvfb + {gl}"),
            "avatar": "bundled sprite", "output_px": args.size, "switches": args.switches,
            "previous_revision": args.previous,
            "set_rig_and_first_frame": stats,
            "previous_over_current_p50": round(stats["previous"]["p50_ms"] / stats["current"]["p50_ms"], 2)}


if __name__ == "__main__":
    sys.exit(main())
