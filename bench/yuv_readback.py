"""The virtual camera's readback before and after the YUYV pass (issue 14), in one run:
an avatar drawn by the sprite renderer into an offscreen target on 30 fps ticks (the
camera feed's rate) and read back either as RGBA (AsyncReadback, what the camera's
feed read before; the camera's worker then composited it on the CPU) or as YUYV made on
the GPU (YuyvReadback, the camera's readback() now: compositing and conversion in a GL
pass), at 1280×720 and 1920×1080.

Modes, taking turns in blocks of ticks so a change in the machine's load falls on all
alike, the rest of each 33.3 ms period slept as the feed's timer does:

- off: draw, glFlush. Nothing read: the tick's baseline.
- rgba, yuyv: request the frame drawn a tick ago (still in the target), draw this one
  and flush, then collect: the frame feed's calls, but collecting after the draw where
  the feed collects before it (its own order is feed_next_tick_* below). `tick_side`
  is the time in the readback's calls (request + collect) on the render thread;
  `to_host_feed_order` is from a frame's request until the collect that returned it (a
  tick or more later where its fence had not signalled at the first collect).
- rgba_polled, yuyv_polled: draw and flush at one tick; at the next, request that frame
  and poll collect() every 0.1 ms until its bytes are on the host: `to_host` is that
  time, not rounded up to a tick.
- yuyv_with_draw: the order of rgba, yuyv with the pass queued right after the draw (flushed
  with it) and only the packed bytes requested at the next tick, YuyvPass and
  AsyncReadback used apart: whether another order would take the pass off the tick.
- feed_next_tick_*, feed_with_draw_* (rgba, yuyv): render/outputs/frame_feed.py's
  tick as it is (whatever is ready collected, then this tick's frame drawn), the frame
  requested at the next tick (still in the framebuffer) or right after its draw, in the
  same flush. `ticks_from_draw_to_host` counts frames by the ticks from their draw to
  the collect that returned them: 1, the next tick, is the soonest.
- pass_alone: draw, glFinish, then the YUYV pass alone (YuyvPass.pack) and glFinish:
  what converting costs the GPU, which on llvmpipe is CPU threads.

On llvmpipe the GPU is the CPU: glReadPixels into a pixel buffer waits for every command
before it (here the pass) and copies there and then, so the pass's rasterisation lands in
request(); and the pass's copy of the frame (glCopyTexSubImage2D) waits for the frame's
rasterisation, so queueing the pass right after the draw waits for the draw instead. On
a GPU request() only queues. Before the numbers, the first YUYV frame is checked against
the numpy reference of its own RGBA (yuv_pack.yuyv_reference): the largest difference in
levels is in the JSON (1 at most is right).

The avatar is tests/harness/drawn_rig.py's, drawn with numpy (the bundled one needs Qt to
rasterise its SVGs): what is read back costs the same whatever the frame shows, and the
same rig is drawn on every machine. Runs under Xvfb with Qt's GL by default (PySide6);
with PYOPENGL_PLATFORM=egl through EGL without a display (a GPU's EGL device, else Mesa's
surfaceless platform), needing only numpy and PyOpenGL.

Last line of output: one JSON object.
Usage: [PYOPENGL_PLATFORM=egl] python bench/yuv_readback.py [--ticks 300] [--out FILE]
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

from bench.machine import busy_cores_seconds, describe, publish  # noqa: E402
from bench.render import percentiles, poses  # noqa: E402

SIZES = ((1280, 720), (1920, 1080))
FPS = 30
BLOCK = 30
POLL_S = 1e-4
# The frame feed's two orders (feed()): a frame requested at the next tick, or with its draw.
FEED_ORDERS = ("next_tick", "with_draw")
BACKGROUND = (32, 35, 42)    # the app's default solid background
EGL = os.environ.get("PYOPENGL_PLATFORM") == "egl"


def p50_p99(samples_s: list[float]) -> dict:
    stats = percentiles(samples_s)
    return {"p50": stats["p50_ms"], "p99": stats["p99_ms"], "samples": stats["samples"]}


def bench_size(width: int, height: int, ticks: int, rig) -> dict:
    from OpenGL import GL

    from render.gl.offscreen import offscreen_target
    from render.gl.readback import AsyncReadback, read_sync
    from render.gl.sprite_renderer import SpriteGLRenderer
    from render.gl.yuv_pack import YuyvPass, YuyvReadback, yuyv_reference
    from render.timing import idle_motion

    seq = poses(ticks + 1)
    target = offscreen_target(width, height)
    try:
        renderer = SpriteGLRenderer(clear_color=(0.0, 0.0, 0.0, 0.0))   # the frame feed's
        renderer.initialize()
        renderer.set_rig(rig)
        renderer.resize(width, height)

        def draw(k: int) -> None:
            t = k / FPS
            target.bind()
            renderer.draw(seq[k % len(seq)], idle_motion.blink(t), idle_motion.breathing(t))

        readers = {"rgba": AsyncReadback(width, height),
                   "yuyv": YuyvReadback(width, height, BACKGROUND),
                   "rgba_polled": AsyncReadback(width, height),
                   "yuyv_polled": YuyvReadback(width, height, BACKGROUND),
                   "yuyv_with_draw": AsyncReadback(width // 2, height),
                   **{f"feed_{order}_{kind}": (YuyvReadback(width, height, BACKGROUND) if kind == "yuyv"
                                               else AsyncReadback(width, height))
                      for order in FEED_ORDERS for kind in ("rgba", "yuyv")}}
        packer = YuyvPass(width, height, BACKGROUND)
        with_draw = YuyvPass(width, height, BACKGROUND)

        # The pass is right on this GL before it is timed.
        draw(0)
        rgba = read_sync(np.empty((height, width, 4), np.uint8)).copy()
        check = YuyvReadback(width, height, BACKGROUND)
        check.request()
        GL.glFinish()
        frame, _ = check.collect()
        level_difference = int(np.abs(frame.astype(int) - yuyv_reference(rgba, BACKGROUND)).max())
        check.release()

        tick_side = {name: [] for name in ("rgba", "yuyv", "yuyv_with_draw")}
        to_host = {name: [] for name in readers}
        pass_alone: list[float] = []
        requested_at: dict[str, dict[int, float]] = {"rgba": {}, "yuyv": {}, "yuyv_with_draw": {}}
        feed_names = [f"feed_{order}_{kind}" for order in FEED_ORDERS for kind in ("rgba", "yuyv")]
        for name in feed_names:
            tick_side[name] = []
            requested_at[name] = {}
        ticks_to_host: dict[str, list[int]] = {name: [] for name in feed_names}

        def off(k: int, first: bool) -> None:
            draw(k)
            GL.glFlush()

        def feed_order(name: str, k: int, first: bool, packed_with_draw: YuyvPass | None = None) -> None:
            """The last tick's frame requested, this one drawn and flushed, whatever is
            ready collected (after the draw: feed() has the feed's own order, which
            collects before it). With `packed_with_draw` the pass is queued
            right after the draw (and flushed with it) instead of at the next tick's
            request, which then only reads the packed bytes: YuyvPass and AsyncReadback
            used apart."""
            reader = readers[name]
            spent = 0.0
            if not first:
                if packed_with_draw is not None:
                    GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, packed_with_draw.fbo)
                t0 = time.perf_counter()
                reader.request(k - 1)
                spent = time.perf_counter() - t0
                requested_at[name][k - 1] = t0
            draw(k)
            if packed_with_draw is not None:
                t0 = time.perf_counter()
                packed_with_draw.pack()
                spent += time.perf_counter() - t0
            GL.glFlush()   # rasterised while the tick sleeps, read back at the next
            t0 = time.perf_counter()
            got = reader.collect()
            t1 = time.perf_counter()
            tick_side[name].append(spent + t1 - t0)
            if got is not None:
                to_host[name].append(t1 - requested_at[name].pop(got[1]))

        def feed(name: str, k: int, first: bool, with_draw: bool) -> None:
            """render/outputs/frame_feed.py's tick as it is: whatever is ready collected
            before this tick's frame is drawn; the frame requested at the next tick, still
            in the framebuffer (`with_draw` False), or right after it is drawn, in the same
            flush (True). `ticks_to_host` counts the ticks from a frame's draw to the tick
            that collects it: 1 is the next tick, as soon as it can be."""
            reader = readers[name]
            t0 = time.perf_counter()
            if not with_draw and not first:
                reader.request(k - 1)
            got = reader.collect()
            spent = time.perf_counter() - t0
            if got is not None:
                requested_at[name].pop(got[1])
                ticks_to_host[name].append(k - got[1])
            draw(k)
            if with_draw:
                t0 = time.perf_counter()
                reader.request(k)
                spent += time.perf_counter() - t0
                requested_at[name][k] = t0
            else:
                GL.glFlush()
                requested_at[name][k] = t0
            tick_side[name].append(spent)

        def polled(name: str, k: int, first: bool) -> None:
            reader = readers[name]
            if not first:
                t0 = time.perf_counter()
                reader.request(k - 1)
                while reader.collect() is None:
                    time.sleep(POLL_S)
                to_host[name].append(time.perf_counter() - t0)
            draw(k)
            GL.glFlush()

        def alone(k: int, first: bool) -> None:
            draw(k)
            GL.glFinish()
            t0 = time.perf_counter()
            packer.pack()
            GL.glFinish()
            pass_alone.append(time.perf_counter() - t0)

        def end_block() -> None:
            """A block's frames still in flight (fences not signalled at its last
            collect) are collected uncounted: the next block of the mode starts afresh,
            and its first tick requests nothing, so no frame is timed across blocks."""
            GL.glFinish()
            for name in requested_at:
                while readers[name].collect() is not None:
                    pass
                requested_at[name].clear()

        modes = {"off": off, "rgba": lambda k, first: feed_order("rgba", k, first),
                 "yuyv": lambda k, first: feed_order("yuyv", k, first),
                 "yuyv_with_draw": lambda k, first: feed_order("yuyv_with_draw", k, first, with_draw),
                 "rgba_polled": lambda k, first: polled("rgba_polled", k, first),
                 "yuyv_polled": lambda k, first: polled("yuyv_polled", k, first),
                 "pass_alone": alone,
                 **{f"feed_{order}_{kind}": (lambda k, first, name=f"feed_{order}_{kind}",
                                             with_draw=order == "with_draw": feed(name, k, first, with_draw))
                    for order in FEED_ORDERS for kind in ("rgba", "yuyv")}}
        tick_times = {name: [] for name in modes}
        for k in range(10):        # shaders, textures and PyOpenGL's lazy set-up
            for tick in modes.values():
                tick(k, k == 0)
        end_block()
        for samples in (*tick_side.values(), *to_host.values(), pass_alone, *ticks_to_host.values()):
            samples.clear()
        period = 1.0 / FPS
        next_tick = time.perf_counter()
        for start in range(0, ticks, BLOCK):
            for name, tick in modes.items():
                for k in range(start, start + BLOCK):
                    next_tick += period
                    t0 = time.perf_counter()
                    tick(k, k == start)
                    tick_times[name].append(time.perf_counter() - t0)
                    time.sleep(max(0.0, next_tick - time.perf_counter()))
                    if time.perf_counter() > next_tick + period:   # fell behind: no burst
                        next_tick = time.perf_counter()
                end_block()
        stats = {name: reader.stats() for name, reader in readers.items()}
        for reader in readers.values():
            reader.release()
        packer.release()
        with_draw.release()
        renderer.release()
    finally:
        target.close()

    def side(kind: str) -> dict:
        return {"bytes_per_frame": readers[kind].nbytes,
                "tick_side_ms": p50_p99(tick_side[kind]),
                "tick_ms": p50_p99(tick_times[kind]),
                "to_host_ms": p50_p99(to_host[f"{kind}_polled"]),
                "to_host_feed_order_ms": p50_p99(to_host[kind]),
                "tick_polled_ms": p50_p99(tick_times[f"{kind}_polled"]),
                "readback_stats": stats[kind], "readback_stats_polled": stats[f"{kind}_polled"]}

    return {"rgba": side("rgba"), "yuyv": side("yuyv"),
            "yuyv_pass_with_the_draw": {
                "bytes_per_frame": readers["yuyv_with_draw"].nbytes,
                "tick_side_ms": p50_p99(tick_side["yuyv_with_draw"]),
                "tick_ms": p50_p99(tick_times["yuyv_with_draw"]),
                "to_host_feed_order_ms": p50_p99(to_host["yuyv_with_draw"]),
                "readback_stats": stats["yuyv_with_draw"]},
            "feed_orders": {name: {
                "tick_side_ms": p50_p99(tick_side[name]),
                "ticks_from_draw_to_host": {str(n): ticks_to_host[name].count(n)
                                            for n in sorted(set(ticks_to_host[name]))},
                "readback_stats": stats[name]} for name in feed_names},
            "off_tick_ms": p50_p99(tick_times["off"]),
            "pass_alone_ms": p50_p99(pass_alone),
            "pass_alone_tick_ms": p50_p99(tick_times["pass_alone"]),
            "yuyv_max_level_difference_vs_reference": level_difference}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=300, help="ticks per mode and size")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    ticks = -(-args.ticks // BLOCK) * BLOCK

    xvfb = app = None
    if EGL:
        from render.gl.gl_platform import use_egl

        use_egl()
    else:
        from tests.harness.services import Xvfb

        xvfb = Xvfb()
        os.environ["DISPLAY"] = xvfb.display
        os.environ["QT_QPA_PLATFORM"] = "xcb"
        from PySide6.QtGui import QGuiApplication

        app = QGuiApplication(["yuv-readback-bench"])
    try:
        from OpenGL import GL

        from render.gl.offscreen import offscreen_target
        from tests.harness.drawn_rig import drawn_rig

        with offscreen_target(4, 4) as target:
            gl = f"{target.description}, GL {GL.glGetString(GL.GL_VERSION).decode()}"
        rig = drawn_rig(1024)
        load_before = os.getloadavg()
        wall0, busy0, own0 = time.monotonic(), busy_cores_seconds(), sum(os.times()[:2])
        sizes = {f"{w}x{h}": bench_size(w, h, ticks, rig) for w, h in SIZES}
    finally:
        if app is not None:
            # Qt's X connection goes before the X server, or Qt aborts the process.
            import shiboken6

            shiboken6.delete(app)
            xvfb.stop()
    wall = time.monotonic() - wall0
    # What the rest of the machine took meanwhile: others share these cores.
    others = (busy_cores_seconds() - busy0 - (sum(os.times()[:2]) - own0)) / wall
    summary = {size: {
        "bytes_per_frame_rgba_yuyv": [case["rgba"]["bytes_per_frame"], case["yuyv"]["bytes_per_frame"]],
        "tick_side_p50_ms_rgba_yuyv": [case["rgba"]["tick_side_ms"]["p50"], case["yuyv"]["tick_side_ms"]["p50"]],
        "tick_side_p99_ms_rgba_yuyv": [case["rgba"]["tick_side_ms"]["p99"], case["yuyv"]["tick_side_ms"]["p99"]],
        "to_host_p50_ms_rgba_yuyv": [case["rgba"]["to_host_ms"]["p50"], case["yuyv"]["to_host_ms"]["p50"]],
        "to_host_p99_ms_rgba_yuyv": [case["rgba"]["to_host_ms"]["p99"], case["yuyv"]["to_host_ms"]["p99"]],
        "pass_alone_p50_ms": case["pass_alone_ms"]["p50"],
    } for size, case in sizes.items()}
    result = {
        "bench": "yuv_readback",
        "machine": describe(f"{'EGL' if EGL else 'Xvfb'} + {gl}"),
        "nice": os.nice(0),
        "load_1min_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "other_processes_cores": round(others, 2),
        "tick_fps": FPS, "ticks_per_mode": ticks,
        "timing": "wall clock on the render thread; each tick's period slept out",
        "summary": summary,
        "before_on_the_worker": ("the RGBA path also composited each sent frame on the camera's "
                                 "worker: 4.8 ms at 1280x720, 13.4 at 1920x1080 on the 2-core VM "
                                 "(bench/results/readback.json); that code is gone, not timed here"),
        "sizes": sizes,
    }
    publish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
