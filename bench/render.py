"""Render cost per frame: mouth-frame synthesis and the full composited frame, for the
sprite rig and the photo rig, on a real GL context (Xvfb + Mesa here).

Every GL time is GPU-complete: the clock stops after glFinish, so llvmpipe's deferred
rasterisation is inside it (the CPU submit time alone is reported beside it).

Mouth frames: regions of 512² and 1024². The sprite rig's mouth drawings are cropped
and scaled to fill that square; the photo rig is the astronaut scaled so that its mouth
rectangle has that many pixels (and the 512² photo as it is, a ~100² mouth). The photo
renderer sizes its mouth frame to the rectangle as shown, so for these its viewport is
the whole canvas, one screen pixel per picture pixel: the frame is made at full size.

Full frames: the sizes a streamer shows the avatar at: 1024x1024 and 1920x1080 (an OBS
canvas or exported video), and the avatar view in the app's default 720x820 window
(APP_VIEW). Each frame moves the mouth, blinks and breathes, as the app does by default.
The 1920x1080 frame is also timed with its copy back to memory (what video export pays).

Baselines in the same run: the sprite rig; the same mouth regions warped on the CPU
(bilinear remap of a viseme-blended displacement field, numpy), what an app without GL
gets; glClear + glFinish alone, the floor of any frame here; and, with --previous REV,
the photo renderer and its shaders as committed at REV, measured beside the current one.

Last line of output: one JSON object.

Usage: python bench/render.py [--frames 200] [--previous REV] [--out bench/results/render.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.gl_session import gl_session  # noqa: E402
from bench.machine import describe, publish  # noqa: E402

REGIONS = (512, 1024)
# The AvatarView's size in the app's default 720x820 main window (Qt Fusion style,
# device pixel ratio 1), measured under Xvfb.
APP_VIEW = (702, 642)
FULL_FRAMES = ((1024, 1024), (1920, 1080), APP_VIEW)
READBACK_FRAME = (1920, 1080)
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
    from pipeline.core.frames import MouthPose
    from pipeline.core.visemes import OPENNESS, OVR_VISEMES

    out = []
    for k in range(n):
        a, b = k % len(OVR_VISEMES), (k * 7 + 3) % len(OVR_VISEMES)
        mix = (k % 10) / 9
        out.append(MouthPose(a, b, mix, (1 - mix) * OPENNESS[OVR_VISEMES[a]]
                             + mix * OPENNESS[OVR_VISEMES[b]]))
    return out


def time_gl(draw: Callable[[int], None], frames: int, warmup: int = 20) -> dict:
    """GPU-complete time per call of draw(k), and its CPU submit time alone."""
    return time_gl_interleaved({"": draw}, frames, warmup)[""]


def time_gl_interleaved(draws: dict[str, Callable[[int], None]], frames: int, warmup: int = 20,
                        block: int = 10) -> dict[str, dict]:
    """time_gl for several draws taking turns in blocks of `block` frames, so a change
    in the machine's load falls on all of them alike."""
    from OpenGL import GL

    for draw in draws.values():
        for k in range(warmup):
            draw(k)
    GL.glFinish()
    total = {name: [] for name in draws}
    submit = {name: [] for name in draws}
    for start in range(0, frames, block):
        for name, draw in draws.items():
            for k in range(start, min(start + block, frames)):
                t0 = time.perf_counter()
                draw(k)
                t1 = time.perf_counter()
                GL.glFinish()
                t2 = time.perf_counter()
                submit[name].append(t1 - t0)
                total[name].append(t2 - t0)
    return {name: {**percentiles(total[name]), "cpu_submit": percentiles(submit[name])} for name in draws}


def full_frame(renderer, seq) -> Callable[[int], None]:
    """A frame as the app's tick draws it: mouth, blink and breathing all moving."""
    from render.timing import idle_motion

    def draw(k: int) -> None:
        t = k / 60
        renderer.draw(seq[k], idle_motion.blink(t), idle_motion.breathing(t))

    return draw


def time_full_frames(makers: dict[str, Callable[[], object]], rig, frames: int) -> dict[str, dict]:
    """The rig drawn by each renderer (taking turns) at every FULL_FRAMES size, and
    read back at READBACK_FRAME."""
    from render.gl.offscreen import OffscreenTarget

    seq = poses(frames + 20)
    out: dict[str, dict] = {name: {} for name in makers}
    for w, h in FULL_FRAMES:
        with OffscreenTarget(w, h) as target:
            renderers = {name: make() for name, make in makers.items()}
            for renderer in renderers.values():
                renderer.initialize()
                renderer.set_rig(rig)
                renderer.resize(w, h)
            draws = {name: full_frame(renderer, seq) for name, renderer in renderers.items()}
            cases = time_gl_interleaved(draws, frames)
            if (w, h) == READBACK_FRAME:
                pixels = np.empty((h, w, 4), np.uint8)
                read = {name: (lambda k, d=d: (d(k), target.read_pixels(pixels))) for name, d in draws.items()}
                for name, with_readback in time_gl_interleaved(read, frames // 2).items():
                    del with_readback["cpu_submit"]
                    cases[name]["with_readback"] = with_readback
            for name, renderer in renderers.items():
                if hasattr(renderer, "mouth_size"):
                    cases[name] = {"mouth_frame": "{}x{}".format(*renderer.mouth_size), **cases[name]}
                out[name][f"{w}x{h}"] = cases[name]
                renderer.release()
    return out


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
    expressions: dict = field(default_factory=dict)  # none: the mouth alone

    def __post_init__(self) -> None:
        from PIL import Image

        from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
        from render.gl.sprite_renderer import coverage_rect
        from render.rigs.sprite import load_sprite_rig

        rig = load_sprite_rig(DEFAULT_AVATAR_MANIFEST, 1024)
        x0, y0, x1, y1 = coverage_rect(*rig.mouths.values())
        box = (int(x0 * 1024), int(y0 * 1024), int(np.ceil(x1 * 1024)), int(np.ceil(y1 * 1024)))
        n = self.size
        self.canvas_size = (n, n)
        self.mouths = {name: np.asarray(Image.fromarray(img).crop(box).resize((n, n), Image.BICUBIC))
                       for name, img in rig.mouths.items()}
        self.base = self.eyes_open = self.eyes_closed = np.zeros((n, n, 4), np.uint8)
        self.viseme_to_mouth = rig.viseme_to_mouth


def bench_sprite(frames: int) -> dict:
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.gl.offscreen import OffscreenTarget
    from render.gl.sprite_renderer import SpriteGLRenderer
    from render.rigs.sprite import load_sprite_rig

    seq = poses(frames + 20)
    out: dict = {"mouth_frame": {}}
    for n in REGIONS:
        with OffscreenTarget(n, n):
            renderer = SpriteGLRenderer(clear_color=(0.0, 0.0, 0.0, 0.0))
            renderer.initialize()
            renderer.set_rig(MouthOnlyRig(n))
            renderer.resize(n, n)
            out["mouth_frame"][f"{n}"] = time_gl(lambda k: renderer.draw(seq[k], 0.0, 0.0), frames)
            renderer.release()
    rig = load_sprite_rig(DEFAULT_AVATAR_MANIFEST, 1024)
    makers = {"": lambda: SpriteGLRenderer(clear_color=(0.1, 0.1, 0.1, 1.0))}
    out["full_frame"] = time_full_frames(makers, rig, frames)[""]
    return out


def astronaut_rigs() -> dict:
    """The astronaut as photo rigs: "native", the 512² photo as it is; "512" and "1024",
    the photo scaled up so that the mouth rectangle has region² pixels (landmarks with
    it, found once on the original) and cropped to at most 4096² around the mouth, as
    the importer keeps pictures within 4096 pixels."""
    from PIL import Image
    from skimage import data

    from pipeline.face.landmarks import FaceLandmarker
    from render.rigs.photo import build_photo_rig

    photo = data.astronaut()
    rgba = np.dstack([photo, np.full(photo.shape[:2], 255, np.uint8)])
    with FaceLandmarker(max_faces=1) as landmarker:
        landmarks = landmarker.detect(rgba)[0].points
    native = build_photo_rig(rgba, landmarks, "astronaut")
    rigs = {"native": native}
    for region in REGIONS:
        x0, y0, x1, y1 = native.mouth_rect
        scale = region / np.sqrt((x1 - x0) * (y1 - y0))
        side = min(4096, round(512 * scale))
        cx, cy = (x0 + x1) / 2 * scale, (y0 + y1) / 2 * scale
        left = min(max(cx - side / 2, 0.0), 512 * scale - side)
        top = min(max(cy - side / 2, 0.0), 512 * scale - side)
        box = (left / scale, top / scale, (left + side) / scale, (top + side) / scale)
        image = np.asarray(Image.fromarray(rgba).resize((side, side), Image.BICUBIC, box=box))
        points = landmarks * np.float32(scale) - np.array([left, top, 0.0], np.float32)
        rigs[f"{region}"] = build_photo_rig(np.ascontiguousarray(image), points, "astronaut")
    return rigs


def bench_photo(makers: dict[str, Callable[[], object]], rigs: dict, frames: int) -> dict[str, dict]:
    """Each photo renderer's mouth frame and full frames for every rig, the renderers
    taking turns case by case."""
    from render.gl.offscreen import OffscreenTarget

    seq = poses(frames + 20)
    out = {name: {"mouth_frame": {}, "full_frame": {}} for name in makers}
    for rig_name, rig in rigs.items():
        x0, y0, x1, y1 = rig.mouth_rect
        # render_mouth_frame draws into the renderer's own framebuffer: the target only
        # holds the context.
        with OffscreenTarget(64, 64):
            renderers = {name: make() for name, make in makers.items()}
            for renderer in renderers.values():
                renderer.initialize()
                renderer.set_rig(rig)
                renderer.resize(*rig.canvas_size)

            def mouth(renderer) -> Callable[[int], None]:
                def draw(k: int) -> None:
                    renderer.update(seq[k], 0.0)
                    renderer.render_mouth_frame()
                return draw

            cases = time_gl_interleaved({name: mouth(r) for name, r in renderers.items()}, frames)
            for name, renderer in renderers.items():
                out[name]["mouth_frame"][rig_name] = {
                    "mouth_rect": f"{x1 - x0}x{y1 - y0}", "mouth_frame": "{}x{}".format(*renderer.mouth_size),
                    "picture": "{}x{}".format(*rig.canvas_size), **cases[name]}
                renderer.release()
        for name, sizes in time_full_frames(makers, rig, frames).items():
            out[name]["full_frame"][rig_name] = {"picture": "{}x{}".format(*rig.canvas_size), **sizes}
    return out


# The photo renderer's imports under their names before the move into subpackages.
MODULES_BEFORE_SUBPACKAGES = {
    "pipeline.frames": "pipeline.core.frames", "pipeline.resources": "pipeline.core.resources",
    "render.gl_renderer": "render.gl.sprite_renderer", "render.idle_motion": "render.timing.idle_motion",
    "render.photo_rig": "render.rigs.photo",
}


def photo_renderer_at(revision: str) -> type:
    """PhotoRenderer and its shaders as committed at `revision` (against today's rig
    and GL helpers), loaded from a scratch folder."""
    module, shaders = gl_module_at(revision, "photo_renderer")
    return lambda **kw: module.PhotoRenderer(shaders_dir=shaders, **kw)


def gl_module_at(revision: str, name: str):
    """(render/gl/`name`.py as committed at `revision`, a scratch folder of that revision's
    shaders), the module loaded from a scratch folder against today's other modules."""
    folder = Path(tempfile.mkdtemp(prefix=f"{name}_"))
    git = lambda *a: subprocess.run(["git", *a], cwd=REPO, check=True, capture_output=True).stdout  # noqa: E731
    files = git("ls-tree", "-r", "--name-only", revision, "render/").decode().split()
    source = f"render/gl/{name}.py" if f"render/gl/{name}.py" in files else f"render/{name}.py"
    (folder / f"{name}.py").write_bytes(git("show", f"{revision}:{source}"))
    shaders = folder / "shaders"
    shaders.mkdir()
    for path in git("ls-tree", "--name-only", revision, "shaders/").decode().split():
        (shaders / Path(path).name).write_bytes(git("show", f"{revision}:{path}"))
    spec = importlib.util.spec_from_file_location(f"{name}_{revision}", folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    # Registered first: dataclasses look their module up while the module runs.
    sys.modules[spec.name] = module
    for old, new in MODULES_BEFORE_SUBPACKAGES.items():  # what a revision before them imports
        sys.modules.setdefault(old, importlib.import_module(new))
    spec.loader.exec_module(module)
    return module, shaders


def bench_clear_floor(frames: int) -> dict:
    """glClear of each size and glFinish: the fixed cost of any GPU-complete frame on
    this driver, which no renderer can beat."""
    from OpenGL import GL

    from render.gl.offscreen import OffscreenTarget

    out = {}
    for w, h in [(n, n) for n in REGIONS] + [s for s in FULL_FRAMES if s[0] != s[1] or s[0] not in REGIONS]:
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


def goals(photo: dict) -> dict:
    return {
        **{f"photo_mouth_frame_{n}_p99_le_{GOAL_MOUTH_P99_MS:g}ms": v["p99_ms"] <= GOAL_MOUTH_P99_MS
           for n, v in photo["mouth_frame"].items()},
        **{f"photo_full_frame_{n}_{size}_p99_le_{GOAL_FULL_FRAME_MS:g}ms": v["p99_ms"] <= GOAL_FULL_FRAME_MS
           for n, sizes in photo["full_frame"].items() for size, v in sizes.items() if size != "picture"},
    }


def p50_ratios(numerator: dict, denominator: dict) -> dict:
    """numerator / denominator P50 for every case the two share (nested by name)."""
    out = {}
    for key, a in numerator.items():
        b = denominator.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            if "p50_ms" in a and "p50_ms" in b:
                out[key] = round(a["p50_ms"] / b["p50_ms"], 2)
            else:
                nested = p50_ratios(a, b)
                if nested:
                    out[key] = nested
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--previous", metavar="REV",
                        help="also time the photo renderer and shaders committed at this git revision")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    load_before = os.getloadavg()
    clear = (0.1, 0.1, 0.1, 1.0)
    with gl_session("render-bench") as gl:
        from render.gl.photo_renderer import PhotoRenderer

        rigs = astronaut_rigs()
        floor = bench_clear_floor(args.frames)
        sprite = bench_sprite(args.frames)
        makers = {"current": lambda: PhotoRenderer(clear_color=clear)}
        if args.previous:
            make_previous = photo_renderer_at(args.previous)
            makers["previous"] = lambda: make_previous(clear_color=clear)
        photos = bench_photo(makers, rigs, args.frames)
        photo, previous = photos["current"], photos.get("previous")
        cpu = bench_cpu_warp(args.frames)
    result = {
        "bench": "render",
        "machine": describe(f"Xvfb + {gl}"),
        "nice": os.nice(0),
        "load_1min_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "frames_per_case": args.frames,
        "timing": "GPU-complete (glFinish before the clock stops); cpu_submit is the draw calls alone",
        "full_frame_sizes": {"1024x1024": "square avatar source / OBS capture",
                             "1920x1080": "OBS canvas or exported video",
                             "{}x{}".format(*APP_VIEW): "avatar view in the app's default 720x820 window"},
        "clear_and_finish_floor": floor,
        "sprite": sprite,
        "photo": photo,
        "baseline_cpu_warp": cpu,
        "ratio_cpu_warp_over_photo_mouth_p50": {
            n: round(cpu[n]["p50_ms"] / photo["mouth_frame"][n]["p50_ms"], 2) for n in cpu},
        "ratio_photo_over_sprite_p50": {
            "mouth_frame": {n: round(photo["mouth_frame"][n]["p50_ms"] / sprite["mouth_frame"][n]["p50_ms"], 2)
                            for n in cpu},
            "full_frame_native": p50_ratios(photo["full_frame"]["native"], sprite["full_frame"])},
        "goals": goals(photo),
    }
    if previous is not None:
        result["photo_previous"] = {"revision": args.previous, **previous}
        result["ratio_previous_over_current_p50"] = p50_ratios(previous, photo)
        result["goals_previous"] = goals(previous)
    publish(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
