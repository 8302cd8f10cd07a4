"""What reading frames back for the virtual camera costs the render tick: the bundled
avatar drawn at 1280×720 by the sprite renderer into an OffscreenTarget on 60 fps ticks,
with the PBO readback (render/gl/readback.py) on and off, against the synchronous
glReadPixels it replaces; and the camera's compositing (render/outputs/virtual_camera.py)
per frame.

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
- async_deferred_camera: async_deferred plus VirtualCamera.offer of each frame, with the
  camera's worker compositing at 30 fps on the same 2 cores. No v4l2loopback device can
  exist here (no loadable kernel modules), so the worker's device is a sink discarding
  the RGB frames: pyvirtualcam's own send (libyuv RGB → I420 and a write) is not in it.
- finish: draw, glFinish: the frame's rasterisation alone, for scale.
- finish_then_readback: draw, glFinish, then request and collect (timed apart in
  "parts"): the readback's own cost once nothing is left to wait for, which is what the
  deferred order pays when the frame was rasterised within its period; and then a
  synchronous glReadPixels of that same finished frame (one copy, where the PBO path
  makes two: into the buffer, out of it).

readback_tick_delta_ms = p50(async) − p50(off), the tick's price for the camera's pixels
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

from bench.machine import describe, publish  # noqa: E402
from bench.render import percentiles, poses  # noqa: E402

SIZE = (1280, 720)
FPS = 60
CAMERA_FPS = 30
BLOCK = 30
GOAL_DELTA_MS = 1.0


class DiscardingDevice:
    """Where pyvirtualcam's Camera would be: takes RGB frames and drops them."""

    device = "discard"

    def __init__(self, width: int, height: int, fps: float) -> None:
        self.frames = 0

    def send(self, frame: np.ndarray) -> None:
        self.frames += 1

    def close(self) -> None:
        pass


def bench_ticks(ticks: int) -> dict:
    from OpenGL import GL

    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.gl.offscreen import OffscreenTarget
    from render.gl.readback import AsyncReadback, read_sync
    from render.gl.sprite_renderer import GLRenderer
    from render.outputs.background import SOLID, Background, parse_colour
    from render.outputs.virtual_camera import VirtualCamera
    from render.rigs.sprite import load_rig
    from render.timing import idle_motion

    w, h = SIZE
    seq = poses(ticks + 1)
    with OffscreenTarget(w, h) as target:
        renderer = GLRenderer(clear_color=(0.0, 0.0, 0.0, 0.0))   # the frame feed's
        renderer.initialize()
        renderer.set_rig(load_rig(DEFAULT_AVATAR_MANIFEST, 1024))
        renderer.resize(w, h)

        def draw(k: int) -> None:
            t = k / FPS
            target.bind()
            renderer.draw(seq[k % len(seq)], idle_motion.blink(t), idle_motion.breathing(t))

        readbacks = {name: AsyncReadback(w, h) for name in
                     ("async", "async_deferred", "async_deferred_camera", "finished")}
        sync_out = np.empty((h, w, 4), np.uint8)
        camera = VirtualCamera(w, h, CAMERA_FPS, Background(SOLID, parse_colour("#20232a")),
                               camera_factory=DiscardingDevice)
        parts = {f"{mode}.{part}": [] for mode, part in (
            ("off", "draw_flush"), ("async", "collect"), ("async", "request"),
            *((mode, part) for mode in ("async_deferred", "async_deferred_camera")
              for part in ("request", "draw_flush", "collect")),
            ("async_deferred_camera", "offer"), ("finished", "request"), ("finished", "collect"),
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

        def deferred(k, name="async_deferred", offer=False):
            rb = readbacks[name]
            if k:
                timed(f"{name}.request", lambda: rb.request(k - 1))
            # Flushed, so it is rasterised while the tick sleeps, not at the next request.
            timed(f"{name}.draw_flush", lambda: (draw(k), GL.glFlush()))
            got = timed(f"{name}.collect", rb.collect)
            if got is None:
                missing[name] += k > 0
            elif offer:
                timed(f"{name}.offer", lambda: camera.offer(*got))

        modes = {"off": off, "sync": sync, "async": async_, "async_deferred": deferred,
                 "async_deferred_camera": lambda k: deferred(k, "async_deferred_camera", True),
                 "finish": finish, "finish_then_readback": finished_readback}
        samples = {name: [] for name in modes}
        camera.start()
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
        camera.stop()
        stats = {name: rb.stats() for name, rb in readbacks.items()}
        for rb in readbacks.values():
            rb.release()
        renderer.release()
    result = {name: percentiles(s) for name, s in samples.items()}
    return {"ticks": result, "parts": {name: percentiles(s) for name, s in parts.items() if s},
            "readback_stats": stats, "collect_found_nothing_after_first_tick": missing,
            "camera": camera.status()}


def bench_compositing(frames: int) -> dict:
    """OpaqueCompositor.over per frame, and offer()'s copy of a readback-shaped view
    (reversed rows) into the mailbox, at the camera sizes."""
    from render.outputs.virtual_camera import OpaqueCompositor

    out = {}
    rng = np.random.default_rng(0)
    for w, h in ((1280, 720), (1920, 1080)):
        alpha = rng.integers(0, 256, (h, w, 1), dtype=np.uint16)
        rgba = np.concatenate([rng.integers(0, 256, (h, w, 3), dtype=np.uint16) * alpha // 255,
                               alpha], axis=2).astype(np.uint8)
        view = rgba[::-1]
        compositor = OpaqueCompositor(w, h, (32, 35, 42))
        buffer = compositor.input_buffer()
        frame = compositor.frame_view(buffer)
        copy, over = [], []
        for _ in range(frames):
            t0 = time.perf_counter()
            np.copyto(frame, view)
            t1 = time.perf_counter()
            compositor.over(buffer)
            t2 = time.perf_counter()
            copy.append(t1 - t0)
            over.append(t2 - t1)
        out[f"{w}x{h}"] = {"composite": percentiles(over), "offer_copy": percentiles(copy)}
    return out


def busy_cores_seconds() -> float:
    """CPU seconds the whole machine has been busy (all cores, /proc/stat)."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = fields[3] + fields[4]          # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=300, help="ticks per mode")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from tests.harness.services import Xvfb

    xvfb = Xvfb()
    os.environ["DISPLAY"] = xvfb.display
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication(["readback-bench"])
    from OpenGL import GL

    from render.gl.offscreen import OffscreenTarget

    with OffscreenTarget(4, 4):
        gl = f"{GL.glGetString(GL.GL_RENDERER).decode()}, GL {GL.glGetString(GL.GL_VERSION).decode()}"
    load_before = os.getloadavg()
    wall0, busy0, own0 = time.monotonic(), busy_cores_seconds(), sum(os.times()[:2])
    try:
        ticks = bench_ticks(args.ticks)
        wall = time.monotonic() - wall0
        # What the rest of the machine took meanwhile: others share these cores.
        others = (busy_cores_seconds() - busy0 - (sum(os.times()[:2]) - own0)) / wall
        compositing = bench_compositing(100)
    finally:
        # Qt's X connection goes before the X server, or Qt aborts the process.
        import shiboken6

        shiboken6.delete(app)
        xvfb.stop()
    p50 = {name: case["p50_ms"] for name, case in ticks["ticks"].items()}
    delta = round(p50["async"] - p50["off"], 3)
    result = {
        "bench": "readback",
        "machine": describe(f"Xvfb + {gl}"),
        "nice": os.nice(0),
        "load_1min_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "other_processes_cores_during_ticks": round(others, 2),
        "size": "{}x{}".format(*SIZE), "tick_fps": FPS, "camera_fps": CAMERA_FPS,
        "timing": "wall clock of each tick's work on the render thread, the rest of the period slept",
        "readback_tick_delta_ms": delta,
        "readback_tick_delta_deferred_ms": round(p50["async_deferred"] - p50["off"], 3),
        "sync_readback_tick_delta_ms": round(p50["sync"] - p50["off"], 3),
        "camera_tick_delta_ms": round(p50["async_deferred_camera"] - p50["off"], 3),
        "goal_delta_ms": GOAL_DELTA_MS,
        "goal_met": delta <= GOAL_DELTA_MS,
        **ticks,
        "compositing": compositing,
    }
    publish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
