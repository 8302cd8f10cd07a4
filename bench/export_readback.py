"""Video export's frames to the encoder, RGBA readback against the YUYV pass (issue 14), in
one run: the draw + readback + encode loop of render/outputs/video_export.py at 1280×720,
through EGL as `lipsync-studio render` draws (a GPU's EGL device, else Mesa's surfaceless
platform), with each of its two FrameReadbacks:

- rgba: the renderer draws over the background; read_pixels (RGBA, 4 bytes a pixel);
  swscale converts RGBA to yuv420p inside the encoder's encode().
- yuyv: the renderer draws over nothing; the YUYV pass composites and packs on the GPU,
  read_sync reads 2 bytes a pixel; swscale only repacks yuyv422 to yuv420p.

Per frame, timed apart with a glFinish after the draw so that the draw's rasterisation
(the CPU's, on llvmpipe) is not billed to the readback: `draw` (draw + glFinish),
`readback` (FrameReadback.frame(): for yuyv the pass, the read and the copies; for rgba
the read and the copy), `encode` (encode() and mux of the frame, swscale's conversion
included), `frame_total` (the three). The glFinish is the only change to the export's
loop, which otherwise leaves the draw to the readback's wait; audio is not encoded (it
costs both modes the same). Modes take turns in blocks of frames, so a change in the
machine's load falls on both alike; each writes its own MP4 (libx264 crf 18, veryfast,
the export's settings), deleted after. x264 encodes on threads of its own a few frames
behind encode(), so some of one mode's encoding spills into the other's block: hence also

- export: the whole of export_video (a silent soundtrack of the same frames, audio
  encoded too) in each mode, taking turns, timed from call to return, per frame.

The avatar is tests/harness/drawn_rig.py's (numpy-drawn, no Qt needed); poses walk through
every viseme pair (bench/render.py). Last line of output: one JSON object.
Usage: python bench/export_readback.py [--frames 240] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.machine import busy_cores_seconds, describe, publish  # noqa: E402
from bench.render import percentiles, poses  # noqa: E402

SIZE = (1280, 720)
FPS = 30
BLOCK = 20
BACKGROUND = (0.125, 0.137, 0.165)   # VideoSettings' default
MODES = ("rgba", "yuyv")
PARTS = ("draw", "readback", "encode", "frame_total")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=240, help="frames per mode")
    parser.add_argument("--exports", type=int, default=3, help="whole exports per mode")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    frames = -(-args.frames // BLOCK) * BLOCK

    from render.gl.gl_platform import use_egl

    use_egl()
    import av
    from OpenGL import GL

    from render.gl.offscreen import offscreen_target, renders_on_cpu
    import numpy as np

    from render.outputs.video_export import (
        Soundtrack,
        VideoSettings,
        export_video,
        frame_readback,
        video_stream,
    )
    from render.rigs.loader import renderer_for
    from render.timing import idle_motion
    from tests.harness.drawn_rig import drawn_rig

    w, h = SIZE
    seq = poses(frames)
    times = {mode: {part: [] for part in PARTS} for mode in MODES}
    load_before = os.getloadavg()
    wall0, busy0, own0 = time.monotonic(), busy_cores_seconds(), sum(os.times()[:2])
    with offscreen_target(w, h) as target, tempfile.TemporaryDirectory() as tmp:
        gl = f"{target.description}, GL {GL.glGetString(GL.GL_VERSION).decode()}"
        rig = drawn_rig(1024)
        cases = {}
        for mode in MODES:
            readback = frame_readback(target, BACKGROUND, mode)
            renderer = renderer_for(rig, readback.clear_color)
            renderer.initialize()
            renderer.set_rig(rig)
            renderer.resize(w, h)
            container = av.open(str(Path(tmp) / f"{mode}.mp4"), "w", format="mp4")
            cases[mode] = (readback, renderer, container,
                           video_stream(container, Fraction(FPS), w, h))
        try:
            for start in range(0, frames, BLOCK):
                for mode in MODES:
                    readback, renderer, container, video = cases[mode]
                    for k in range(start, start + BLOCK):
                        t = k / FPS
                        t0 = time.perf_counter()
                        target.bind()
                        renderer.draw(seq[k], idle_motion.blink(t), idle_motion.breathing(t))
                        GL.glFinish()
                        t1 = time.perf_counter()
                        frame = readback.frame()
                        t2 = time.perf_counter()
                        frame.pts = k
                        container.mux(video.encode(frame))
                        t3 = time.perf_counter()
                        for part, dt in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t3 - t0)):
                            times[mode][part].append(dt)
            for mode in MODES:
                readback, renderer, container, video = cases[mode]
                container.mux(video.encode(None))
        finally:
            for readback, renderer, container, _ in cases.values():
                container.close()
                renderer.release()
                readback.release()
        nbytes = {mode: cases[mode][0].nbytes for mode in MODES}
        # The same frames as a whole export: silence as long as them, poses by frame.
        rate = 48_000
        soundtrack = Soundtrack(rate, frames / FPS,
                                lambda: iter([np.zeros(rate * frames // FPS, np.float32)]),
                                lambda t, period: seq[round(t * FPS) % frames], [])
        settings = VideoSettings(float(FPS), SIZE, BACKGROUND)
        export = {mode: [] for mode in MODES}
        for _ in range(args.exports):
            for mode in MODES:
                t0 = time.perf_counter()
                export_video(Path(tmp) / "export.mp4", rig, soundtrack, settings, target,
                             readback=mode)
                export[mode].append((time.perf_counter() - t0) / frames)
        cpu = renders_on_cpu(target.renderer)
    wall = time.monotonic() - wall0
    # What the rest of the machine took meanwhile: others share these cores.
    others = (busy_cores_seconds() - busy0 - (sum(os.times()[:2]) - own0)) / wall
    stats = {mode: {f"{part}_ms": percentiles(times[mode][part]) for part in PARTS}
             for mode in MODES}
    per = {part: [stats[mode][f"{part}_ms"][q] for mode in MODES for q in ("p50_ms", "p99_ms")]
           for part in PARTS}
    result = {
        "bench": "export_readback",
        "machine": describe(f"EGL + {gl}"),
        "renders_on_cpu": cpu,
        "nice": os.nice(0),
        "load_1min_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "other_processes_cores": round(others, 2),
        "size": f"{w}x{h}", "frames_per_mode": frames, "block": BLOCK,
        "timing": "wall clock per frame; glFinish after the draw, so readback excludes it",
        "summary": {
            "bytes_read_back_per_frame_rgba_yuyv": [nbytes["rgba"], nbytes["yuyv"]],
            **{f"{part}_p50_p99_ms_rgba_then_yuyv": per[part] for part in PARTS},
            "export_ms_per_frame_rgba_yuyv_median": [
                round(float(np.median(export[mode])) * 1000, 3) for mode in MODES],
        },
        "export_ms_per_frame": {mode: [round(x * 1000, 3) for x in export[mode]]
                                for mode in MODES},
        "modes": stats,
    }
    publish(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
