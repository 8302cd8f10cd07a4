"""What reading RGBA frames back (the readback of the browser source's feed) costs the
render tick: the bundled avatar drawn at 1280×720 by the sprite renderer into an
OffscreenTarget on 60 fps ticks, with the PBO readback (render/gl/readback.py) on and
off, against the synchronous glReadPixels it replaces.

The virtual camera no longer reads RGBA: its feed's readback is YUYV packed on the GPU
(render/gl/yuv_pack.py YuyvReadback), measured by bench/yuv_readback.py, so the camera
mode (VirtualCamera.offer of RGBA frames) and the CPU compositing bench that were here
are gone; bench/results/readback.json is from before and still has them.

Tick modes, taking turns in blocks so a change in the machine's load falls on all alike,
each tick timed from its start to its end (wall clock, the render thread's view) and then
the rest of its 16.7 ms period slept, as the display tick does:

- off: draw, glFlush. Nothing read; llvmpipe rasterises in its own threads afterwards.
- sync: draw, then glReadPixels into a preallocated array (waits for the frame).
- async: collect the previous frame, draw, request this one (the frame feed's order).
- async_deferred: request the previous frame (still in the target: nothing else draws
  into it), draw, glFlush, collect the previous frame. The frame's rasterisation had a whole period to finish, so
  the request only copies; on a GPU the copy is queued ahead of the draw and done by
  the collect at the end of the tick. One frame of latency either way.
- finish: draw, glFinish: the frame's rasterisation alone, for scale.
- finish_then_readback: draw, glFinish, then request and collect (timed apart in
  "parts"): the readback's own cost once nothing is left to wait for, which is what the
  deferred order pays when the frame was rasterised within its period; and then a
  synchronous glReadPixels of that same finished frame (one copy, where the PBO path
  makes two: into the buffer, out of it).

readback_tick_delta_ms = p50(async) − p50(off), the tick's price for the frame's pixels
(goal ≤ 1 ms); the deferred order's delta beside it. With llvmpipe the GPU is the CPU:
its glReadPixels into a pixel buffer waits for the frame and copies there and then, so
"async" is no cheaper than "sync" on this machine by construction.

Last line of output: one JSON object. Usage: python bench/readback.py [--ticks 300] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.gl_session import gl_session  # noqa: E402
from bench.machine import busy_cores_seconds, describe, publish  # noqa: E402
from bench.render import percentiles, poses  # noqa: E402

SIZE = (1280, 720)
FPS = 60
BLOCK = 30
GOAL_DELTA_MS = 1.0


def bench_ticks(ticks: int) -> dict:
    from OpenGL import GL

    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.gl.offscreen import OffscreenTarget
    from render.gl.readback import AsyncReadback, read_sync
    from render.gl.sprite_renderer import SpriteGLRenderer
    from render.rigs.sprite import load_sprite_rig
    from render.timing import idle_motion

    w, h = SIZE
    seq = poses(ticks + 1)
    with OffscreenTarget(w, h) as target:
        renderer = SpriteGLRenderer(clear_color=(0.0, 0.0, 0.0, 0.0))   # the frame feed's
        renderer.initialize()
        renderer.set_rig(load_sprite_rig(DEFAULT_AVATAR_MANIFEST, 1024))
        renderer.resize(w, h)

        def draw(k: int) -> None:
            t = k / FPS
            target.bind()
            renderer.draw(seq[k % len(seq)], idle_motion.blink(t), idle_motion.breathing(t))

        readbacks = {name: AsyncReadback(w, h) for name in
                     ("async", "async_deferred", "finished")}
        sync_out = np.empty((h, w, 4), np.uint8)
        parts = {f"{mode}.{part}": [] for mode, part in (
            ("off", "draw_flush"), ("async", "collect"), ("async", "request"),
            *(("async_deferred", part) for part in ("request", "draw_flush", "collect")),
            ("finished", "request"), ("finished", "collect"),
            ("finished", "sync_read"))}
        missing = {name: 0 for name in readbacks if name != "finished"}

        def timed(name: str, call):
            t0 = time.perf_counter()
            out = call()
            parts[name].append(time.perf_counter() - t0)
            return out

        def off(k):
            timed("off.draw_flush", lambda: (draw(k), GL.glFlush()))

        def sync(k):
            draw(k)
            read_sync(sync_out)

        def finish(k):
            draw(k)
            GL.glFinish()

        def finished_readback(k):
            # The readback's own cost, the frame's rasterisation over before it starts.
            rb = readbacks["finished"]
            draw(k)
            GL.glFinish()
            timed("finished.request", lambda: rb.request(k))
            timed("finished.collect", rb.collect)
            # The same finished frame read straight into memory: one copy instead of two.
            timed("finished.sync_read", lambda: read_sync(sync_out))

        def async_(k):
            rb = readbacks["async"]
            if timed("async.collect", rb.collect) is None and k:
                missing["async"] += 1
            draw(k)
            timed("async.request", lambda: rb.request(k))

        def deferred(k):
            rb = readbacks["async_deferred"]
            if k:
                timed("async_deferred.request", lambda: rb.request(k - 1))
            # Flushed, so it is rasterised while the tick sleeps, not at the next request.
            timed("async_deferred.draw_flush", lambda: (draw(k), GL.glFlush()))
            if timed("async_deferred.collect", rb.collect) is None and k:
                missing["async_deferred"] += 1

        modes = {"off": off, "sync": sync, "async": async_, "async_deferred": deferred,
                 "finish": finish, "finish_then_readback": finished_readback}
        samples = {name: [] for name in modes}
        for k in range(20):        # shaders, textures and PyOpenGL's lazy set-up
            for tick in modes.values():
                tick(k)
        GL.glFinish()
        period = 1.0 / FPS
        next_tick = time.perf_counter()
        for start in range(0, ticks, BLOCK):
            for name, tick in modes.items():
                for k in range(start, min(start + BLOCK, ticks)):
                    next_tick += period
                    t0 = time.perf_counter()
                    tick(k)
                    samples[name].append(time.perf_counter() - t0)
                    time.sleep(max(0.0, next_tick - time.perf_counter()))
                    if time.perf_counter() > next_tick + period:   # fell behind: no burst
                        next_tick = time.perf_counter()
        stats = {name: rb.stats() for name, rb in readbacks.items()}
        for rb in readbacks.values():
            rb.release()
        renderer.release()
    result = {name: percentiles(s) for name, s in samples.items()}
    return {"ticks": result, "parts": {name: percentiles(s) for name, s in parts.items() if s},
            "readback_stats": stats, "collect_found_nothing_after_first_tick": missing}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=300, help="ticks per mode")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    load_before = os.getloadavg()
    with gl_session("readback-bench", platform="xcb") as gl:
        wall0, busy0, own0 = time.monotonic(), busy_cores_seconds(), sum(os.times()[:2])
        ticks = bench_ticks(args.ticks)
        wall = time.monotonic() - wall0
        # What the rest of the machine took meanwhile: others share these cores.
        others = (busy_cores_seconds() - busy0 - (sum(os.times()[:2]) - own0)) / wall
    p50 = {name: case["p50_ms"] for name, case in ticks["ticks"].items()}
    delta = round(p50["async"] - p50["off"], 3)
    result = {
        "bench": "readback",
        "machine": describe(f"Xvfb + {gl}"),
        "nice": os.nice(0),
        "load_1min_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "other_processes_cores_during_ticks": round(others, 2),
        "size": "{}x{}".format(*SIZE), "tick_fps": FPS,
        "timing": "wall clock of each tick's work on the render thread, the rest of the period slept",
        "readback_tick_delta_ms": delta,
        "readback_tick_delta_deferred_ms": round(p50["async_deferred"] - p50["off"], 3),
        "sync_readback_tick_delta_ms": round(p50["sync"] - p50["off"], 3),
        "goal_delta_ms": GOAL_DELTA_MS,
        "goal_met": delta <= GOAL_DELTA_MS,
        **ticks,
    }
    publish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
