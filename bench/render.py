"""Render cost per frame: mouth-frame synthesis and the full composited frame, for the
sprite rig and the photo rig, on a real GL context (Xvfb + Mesa here).

Every GL time is GPU-complete: the clock stops after glFinish, so llvmpipe's deferred
rasterisation is inside it (the CPU submit time alone is reported beside it). Mouth
regions are 512² and 1024²: the sprite rig's mouth drawings cropped and scaled to fill
that square; the photo rig made from the astronaut scaled so that its mouth rectangle
has that many pixels (and the 512² photo as it is, a 92x76 mouth). Full frames are
1920x1080. Baselines in the same run: the same mouth regions warped on the CPU
(bilinear remap of a viseme-blended displacement field, numpy), what an app without GL
gets; the sprite rig; and glClear + glFinish alone, the floor of any frame here.

Last line of output: one JSON object.

Usage: python bench/render.py [--frames 200] [--out bench/results/render.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import describe  # noqa: E402

REGIONS = (512, 1024)
FULL_FRAME = (1920, 1080)
GOAL_MOUTH_P99_MS = 4.0
GOAL_FULL_FRAME_MS = 8.0


def percentiles(samples_s: list[float]) -> dict:
    ms = np.asarray(samples_s) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3),
            "p99_ms": round(float(np.percentile(ms, 99)), 3),
            "max_ms": round(float(ms.max()), 3), "samples": len(ms)}


def poses(n: int):
    """A pose per frame walking through every viseme pair with changing blends, so no
    frame repeats the one before it."""
    from pipeline.frames import MouthPose
    from pipeline.visemes import OVR_VISEMES, OPENNESS

    out = []
    for k in range(n):
        a, b = k % len(OVR_VISEMES), (k * 7 + 3) % len(OVR_VISEMES)
        mix = (k % 10) / 9
        out.append(MouthPose(a, b, mix, (1 - mix) * OPENNESS[OVR_VISEMES[a]]
                             + mix * OPENNESS[OVR_VISEMES[b]]))
    return out


def time_gl(draw: Callable[[int], None], frames: int, warmup: int = 20) -> dict:
    """GPU-complete time per call of draw(k), and its CPU submit time alone."""
    from OpenGL import GL

    for k in range(warmup):
        draw(k)
    GL.glFinish()
    total, submit = [], []
    for k in range(frames):
        t0 = time.perf_counter()
        draw(k)
        t1 = time.perf_counter()
        GL.glFinish()
        t2 = time.perf_counter()
        submit.append(t1 - t0)
        total.append(t2 - t0)
    return {**percentiles(total), "cpu_submit": percentiles(submit)}


@dataclass
class MouthOnlyRig:
    """The bundled sprite rig reduced to its mouth drawings, cropped to their common
    box and scaled to fill size×size: drawing it is the sprite rig's mouth frame."""

    size: int
    canvas_size: tuple[int, int] = (0, 0)
    base: np.ndarray = field(default=None)
    eyes_open: np.ndarray = field(default=None)
    eyes_closed: np.ndarray = field(default=None)
    mouths: dict = field(default_factory=dict)
    viseme_to_mouth: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        from PIL import Image

        from pipeline.resources import DEFAULT_AVATAR_MANIFEST
        from render.avatar_rig import load_rig
        from render.gl_renderer import coverage_rect

        rig = load_rig(DEFAULT_AVATAR_MANIFEST, 1024)
        x0, y0, x1, y1 = coverage_rect(*rig.mouths.values())
        box = (int(x0 * 1024), int(y0 * 1024), int(np.ceil(x1 * 1024)), int(np.ceil(y1 * 1024)))
        n = self.size
        self.canvas_size = (n, n)
        self.mouths = {name: np.asarray(Image.fromarray(img).crop(box).resize((n, n), Image.BICUBIC))
                       for name, img in rig.mouths.items()}
        self.base = self.eyes_open = self.eyes_closed = np.zeros((n, n, 4), np.uint8)
        self.viseme_to_mouth = rig.viseme_to_mouth


def bench_sprite(frames: int) -> dict:
    from pipeline.resources import DEFAULT_AVATAR_MANIFEST
    from render import idle_motion
    from render.avatar_rig import load_rig
    from render.gl_renderer import GLRenderer
    from render.offscreen import OffscreenTarget

    seq = poses(frames + 20)
    out: dict = {"mouth_frame": {}}
    for n in REGIONS:
        with OffscreenTarget(n, n) as target:
            renderer = GLRenderer(clear_color=(0.0, 0.0, 0.0, 0.0))
            renderer.initialize()
            renderer.set_rig(MouthOnlyRig(n))
            renderer.resize(n, n)
            out["mouth_frame"][f"{n}"] = time_gl(lambda k: renderer.draw(seq[k], 0.0, 0.0), frames)
            renderer.release()
    w, h = FULL_FRAME
    with OffscreenTarget(w, h) as target:
        renderer = GLRenderer(clear_color=(0.1, 0.1, 0.1, 1.0))
        renderer.initialize()
        renderer.set_rig(load_rig(DEFAULT_AVATAR_MANIFEST, h))
        renderer.resize(w, h)

        def full(k: int) -> None:
            t = k / 60
            renderer.draw(seq[k], idle_motion.blink(t), idle_motion.breathing(t))

        out["full_frame"] = {"size": f"{w}x{h}", **time_gl(full, frames)}
        pixels = np.empty((h, w, 4), np.uint8)
        # What video export pays per frame: the frame plus its copy back to memory.
        with_readback = time_gl(lambda k: (full(k), target.read_pixels(pixels)), frames // 2)
        del with_readback["cpu_submit"]
        out["full_frame_with_readback"] = with_readback
        renderer.release()
    return out


def astronaut_rig(region: int | None):
    """The astronaut as a photo rig whose mouth rectangle has region² pixels: the photo
    scaled up (landmarks with it, found once on the original) and cropped to at most
    4096² around the mouth, as the importer keeps pictures within 4096 pixels. None:
    the 512² photo as it is."""
    from PIL import Image
    from skimage import data

    from render.face_landmarks import FaceLandmarker
    from render.photo_rig import build_photo_rig

    photo = data.astronaut()
    rgba = np.dstack([photo, np.full(photo.shape[:2], 255, np.uint8)])
    with FaceLandmarker(max_faces=1) as landmarker:
        landmarks = landmarker.detect(rgba)[0].points
    native = build_photo_rig(rgba, landmarks, "astronaut")
    if region is None:
        return native
    x0, y0, x1, y1 = native.mouth_rect
    scale = region / np.sqrt((x1 - x0) * (y1 - y0))
    side = min(4096, round(512 * scale))
    cx, cy = (x0 + x1) / 2 * scale, (y0 + y1) / 2 * scale
    left = min(max(cx - side / 2, 0.0), 512 * scale - side)
    top = min(max(cy - side / 2, 0.0), 512 * scale - side)
    box = (left / scale, top / scale, (left + side) / scale, (top + side) / scale)
    image = np.asarray(Image.fromarray(rgba).resize((side, side), Image.BICUBIC, box=box))
    points = landmarks * np.float32(scale) - np.array([left, top, 0.0], np.float32)
    return build_photo_rig(np.ascontiguousarray(image), points, "astronaut")


def bench_photo(frames: int) -> dict:
    from render import idle_motion
    from render.offscreen import OffscreenTarget
    from render.photo_renderer import PhotoRenderer

    seq = poses(frames + 20)
    out: dict = {"mouth_frame": {}, "full_frame": {}}
    w, h = FULL_FRAME
    for n in (*REGIONS, None):
        rig = astronaut_rig(n)
        x0, y0, x1, y1 = rig.mouth_rect
        with OffscreenTarget(w, h) as target:
            renderer = PhotoRenderer(clear_color=(0.1, 0.1, 0.1, 1.0))
            renderer.initialize()
            renderer.set_rig(rig)
            renderer.resize(w, h)

            def mouth(k: int) -> None:
                renderer.update(seq[k], 0.0)
                renderer.render_mouth_frame()

            def full(k: int) -> None:
                t = k / 60
                renderer.draw(seq[k], idle_motion.blink(t), idle_motion.breathing(t))

            name = "native_photo" if n is None else f"{n}"
            out["mouth_frame"][name] = {"mouth_rect": f"{x1 - x0}x{y1 - y0}",
                                         "picture": "{}x{}".format(*rig.canvas_size),
                                         **time_gl(mouth, frames)}
            out["full_frame"][name] = {"size": f"{w}x{h}", **time_gl(full, frames)}
            pixels = np.empty((h, w, 4), np.uint8)
            with_readback = time_gl(lambda k: (full(k), target.read_pixels(pixels)), frames // 2)
            del with_readback["cpu_submit"]
            out["full_frame"][name]["with_readback"] = with_readback
            renderer.release()
    return out


def bench_clear_floor(frames: int) -> dict:
    """glClear of each size and glFinish: the fixed cost of any GPU-complete frame on
    this driver, which no renderer can beat."""
    from OpenGL import GL

    from render.offscreen import OffscreenTarget

    out = {}
    for w, h in [(n, n) for n in REGIONS] + [FULL_FRAME]:
        with OffscreenTarget(w, h):
            out[f"{w}x{h}"] = time_gl(lambda k: GL.glClear(GL.GL_COLOR_BUFFER_BIT), frames)
            del out[f"{w}x{h}"]["cpu_submit"]
    return out


def bench_cpu_warp(frames: int) -> dict:
    """Bilinear remap of an RGBA region by a displacement field blended from two viseme
    fields per frame: the CPU path's minimum work for one mouth frame."""
    rng = np.random.default_rng(0)
    seq = poses(frames + 5)
    out = {}
    for n in REGIONS:
        image = rng.integers(0, 256, (n, n, 4), dtype=np.uint8)
        # Smooth per-viseme displacement fields (pixels), as a landmark basis would give.
        coarse = rng.normal(0.0, n * 0.02, (15, 2, 9, 9)).astype(np.float32)
        grid = np.linspace(0, 8, n, dtype=np.float32)
        i0 = np.minimum(grid.astype(np.int32), 7)
        f = grid - i0
        fields = ((coarse[:, :, i0][:, :, :, i0] * (1 - f)[None, None, None, :]
                   + coarse[:, :, i0][:, :, :, i0 + 1] * f[None, None, None, :]) * (1 - f)[None, None, :, None]
                  + (coarse[:, :, i0 + 1][:, :, :, i0] * (1 - f)[None, None, None, :]
                     + coarse[:, :, i0 + 1][:, :, :, i0 + 1] * f[None, None, None, :]) * f[None, None, :, None])
        ys, xs = np.mgrid[0:n, 0:n].astype(np.float32)
        flat = image.reshape(-1, 4).astype(np.float32)
        samples = []
        for k in range(frames + 5):
            p = seq[k]
            t0 = time.perf_counter()
            d = (1 - p.mix) * fields[p.viseme_a] + p.mix * fields[p.viseme_b]
            sx = np.clip(xs + d[0], 0, n - 1.001)
            sy = np.clip(ys + d[1], 0, n - 1.001)
            x0, y0 = sx.astype(np.int32), sy.astype(np.int32)
            fx, fy = (sx - x0)[..., None], (sy - y0)[..., None]
            idx = y0 * n + x0
            top = flat[idx] * (1 - fx) + flat[idx + 1] * fx
            bottom = flat[idx + n] * (1 - fx) + flat[idx + n + 1] * fx
            warped = (top * (1 - fy) + bottom * fy + 0.5).astype(np.uint8)
            samples.append(time.perf_counter() - t0)
        assert warped.shape == (n, n, 4)
        out[f"{n}"] = percentiles(samples[5:])
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from tests.harness.services import Xvfb

    xvfb = Xvfb()
    os.environ["DISPLAY"] = xvfb.display
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication(["render-bench"])
    from OpenGL import GL

    from render.offscreen import OffscreenTarget

    with OffscreenTarget(4, 4):
        gl = f"{GL.glGetString(GL.GL_RENDERER).decode()}, GL {GL.glGetString(GL.GL_VERSION).decode()}"
    try:
        floor = bench_clear_floor(args.frames)
        sprite = bench_sprite(args.frames)
        photo = bench_photo(args.frames)
        cpu = bench_cpu_warp(args.frames)
    finally:
        # Qt's X connection goes before the X server, or Qt aborts the process.
        import shiboken6

        shiboken6.delete(app)
        xvfb.stop()
    result = {
        "bench": "render",
        "machine": describe(f"Xvfb + {gl}"),
        "frames_per_case": args.frames,
        "timing": "GPU-complete (glFinish before the clock stops); cpu_submit is the draw calls alone",
        "clear_and_finish_floor": floor,
        "sprite": sprite,
        "photo": photo,
        "baseline_cpu_warp": cpu,
        "ratio_cpu_warp_over_photo_mouth_p50": {
            n: round(cpu[n]["p50_ms"] / photo["mouth_frame"][n]["p50_ms"], 2) for n in cpu},
        "ratio_photo_over_sprite_mouth_p50": {
            n: round(photo["mouth_frame"][n]["p50_ms"] / sprite["mouth_frame"][n]["p50_ms"], 2)
            for n in cpu},
        "goals": {
            **{f"photo_mouth_frame_{n}_p99_le_{GOAL_MOUTH_P99_MS:g}ms":
               v["p99_ms"] <= GOAL_MOUTH_P99_MS for n, v in photo["mouth_frame"].items()},
            **{f"photo_full_frame_{n}_p99_le_{GOAL_FULL_FRAME_MS:g}ms":
               v["p99_ms"] <= GOAL_FULL_FRAME_MS for n, v in photo["full_frame"].items()},
        },
    }
    line = json.dumps(result)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
