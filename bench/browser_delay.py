"""The browser source's frame delay, from publish() to the page's paint in a real headless
Chromium, at 60 fps for 512×512 and 1280×720 frames, and what each way of encoding the
frames costs: encode ms and bytes here, decode + paint ms in the page.

Frames are the bundled avatar "Pixie" (base, open eyes, one of four mouths per frame,
rasterised from its SVGs by the same Chromium), premultiplied as the GL output gives
them: 512×512 is its own canvas; at 1280×720 it is 720×720 in the middle, the rest
transparent.

Encodings compared (all lossless, straight RGBA the canvas takes):
- raw / png: what render/outputs/browser_source.py sends: the visible rectangle
  (bounding box of the pixels not fully transparent), raw or as PNG (Pillow, level 1);
- raw_full: the whole frame raw (no crop);
- zlib: the rectangle deflated (zlib level 1), inflated by the page's DecompressionStream;
- webp: the rectangle as lossless WebP (method 0), decoded like the PNG.
Page times are measured in the page with performance.now(), decode through paint
(getImageData of one pixel after it, so the paint is done), medians of 15.

state_in_page estimates option (b), not built: the page drawing the avatar itself from
its state (AvatarState: 19 float64) with the rig's layers already decoded in the page;
bytes and encode of the state, and the page's drawImage of the three layers the sprite
rig shows per frame. A photo rig would need a WebGL mesh warp (not measurable here:
headless Chromium has no GPU), and a second renderer kept identical to the GL one.

End to end (raw and png, taking turns in blocks so load changes fall on both): a
BrowserSource and the page, frames published on a 60 fps deadline grid; the delay is the
server's (its clock probe method, in browser_source's docstring), after a 1 s warm-up.
Goal (issue 13): delay ≤ 1 frame + 10 ms (26.7 ms) at P50 and P99. ready_*: publish →
the frame ready to paint in the page (received and decoded), before it waits for the
page's next animation frame (60 Hz in headless Chromium); that wait depends on the phase
of our 60 fps grid against the page's, random per block. painted_fps is the page's paint
rate. publish_call_*: what publish() costs its caller, beside a bare np.copyto of the
same frame right after it (bare_copy_*): the floor of any copy on that thread at those
moments (preempted on the loaded machine, waiting for the GIL). Cores used meanwhile: the whole machine's (/proc/stat: other jobs share it), this
process's (publisher, encoder, server) and the browser's.

Last line of output: one JSON object. Usage: python bench/browser_delay.py [--seconds 3]
[--rounds 3] [--out bench/results/browser_delay.json]
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import socket
import sys
import time
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.machine import describe, publish  # noqa: E402
from pipeline.core.avatar_state import SIZE as STATE_FIELDS  # noqa: E402
from render.outputs.browser_source import BrowserSource  # noqa: E402
from render.outputs.browser_wire import (  # noqa: E402
    PNG,
    RAW,
    encode_frame,
    unpremultiply,
    visible_bounds,
)
from tests.harness.browser import chromium  # noqa: E402

SIZES = ((512, 512), (1280, 720))
FPS = 60.0
GOAL_MS = 1e3 / FPS + 10.0
AVATAR = REPO / "assets" / "avatars" / "default"
LAYERS = ("base.svg", "eyes_open.svg")
MOUTHS = ("mouth_open.svg", "mouth_closed.svg", "mouth_wide.svg", "mouth_round.svg")
WARM_UP_S = 1.0

# Draws the avatar's layers into a w×h canvas (a square of min(w, h) in the middle).
RASTERISE = """async ([urls, w, h]) => {
    const c = document.createElement("canvas"); c.width = w; c.height = h;
    const x = c.getContext("2d"); const s = Math.min(w, h);
    for (const u of urls) { const i = new Image(); i.src = u; await i.decode();
                            x.drawImage(i, (w - s) / 2, (h - s) / 2, s, s); }
    const d = x.getImageData(0, 0, w, h).data; let r = "";
    for (let i = 0; i < d.length; i += 32768) r += String.fromCharCode.apply(null, d.subarray(i, i + 32768));
    return btoa(r);
}"""

# Decode + paint of each encoded form, in the page; medians of 15 runs, ms.
PAGE_COSTS = """async ([w, h, items]) => {
    const c = document.createElement("canvas"); c.width = w; c.height = h;
    const x = c.getContext("2d");
    const bytes = (b64) => Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0));
    const bitmap = async (u, type, r) => { const b = await createImageBitmap(new Blob([u], {type}));
        x.clearRect(0, 0, w, h); x.drawImage(b, r[0], r[1]); b.close(); };
    const paint = {
        raw: async (u, r) => { x.clearRect(0, 0, w, h);
            x.putImageData(new ImageData(new Uint8ClampedArray(u.buffer), r[2], r[3]), r[0], r[1]); },
        zlib: async (u, r) => { const b = await new Response(new Blob([u]).stream()
                .pipeThrough(new DecompressionStream("deflate"))).arrayBuffer();
            x.clearRect(0, 0, w, h);
            x.putImageData(new ImageData(new Uint8ClampedArray(b), r[2], r[3]), r[0], r[1]); },
        png: (u, r) => bitmap(u, "image/png", r),
        webp: (u, r) => bitmap(u, "image/webp", r),
    };
    const out = {};
    for (const [name, kind, b64, rect] of items) {
        const u = bytes(b64); const ts = [];
        for (let i = 0; i < 16; i++) { const t = performance.now(); await paint[kind](u, rect);
            x.getImageData(0, 0, 1, 1); if (i) ts.push(performance.now() - t); }
        ts.sort((a, b) => a - b); out[name] = ts[7];
    }
    return out;
}"""

# The state-in-page estimate: three decoded layers drawn per frame.
STATE_PAINT = """async ([urls, w, h]) => {
    const c = document.createElement("canvas"); c.width = w; c.height = h;
    const x = c.getContext("2d"); const s = Math.min(w, h); const layers = [];
    for (const u of urls) { const i = new Image(); i.src = u; await i.decode();
        layers.push(await createImageBitmap(i, {resizeWidth: s, resizeHeight: s})); }
    const ts = [];
    for (let k = 0; k < 31; k++) { const t = performance.now(); x.clearRect(0, 0, w, h);
        for (const b of layers) x.drawImage(b, (w - s) / 2, (h - s) / 2 + (k % 3) * 0.25);
        x.getImageData(0, 0, 1, 1); if (k) ts.push(performance.now() - t); }
    ts.sort((a, b) => a - b); return ts[15];
}"""


def data_url(path: Path) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(path.read_bytes()).decode()


def premultiply(straight: np.ndarray) -> np.ndarray:
    s = straight.astype(np.uint32)
    out = s.copy()
    out[..., :3] = (s[..., :3] * s[..., 3:4] + 127) // 255
    return out.astype(np.uint8)


def avatar_frames(page, w: int, h: int) -> list[np.ndarray]:
    frames = []
    for mouth in MOUTHS:
        urls = [data_url(AVATAR / name) for name in (*LAYERS, mouth)]
        data = base64.b64decode(page.evaluate(RASTERISE, [urls, w, h]))
        frames.append(premultiply(np.frombuffer(data, np.uint8).reshape(h, w, 4)))
    return frames


def median_ms(function, runs: int = 15):
    function()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e3), result


def encodings(frame: np.ndarray) -> dict[str, tuple[float, bytes, str, list[int]]]:
    """Encode ms, payload, the page's decoder and the rectangle, per encoding."""
    x, y, w, h = visible_bounds(frame)
    rect = [x, y, w, h]
    fh, fw = frame.shape[:2]

    def straight(pixels):
        out = np.empty_like(pixels)
        unpremultiply(pixels, out)
        return out

    def crop_straight():
        return straight(frame[y:y + h, x:x + w])

    out = {}
    for name, encoding in (("raw", RAW), ("png", PNG)):
        ms, message = median_ms(lambda: encode_frame(frame, 0, 0.0, encoding))
        out[name] = (ms, bytes(message[32:]), name, rect)
    ms, payload = median_ms(lambda: straight(frame).tobytes())
    out["raw_full"] = (ms, payload, "raw", [0, 0, fw, fh])
    ms, payload = median_ms(lambda: zlib.compress(crop_straight(), 1))
    out["zlib"] = (ms, payload, "zlib", rect)

    def webp():
        buffer = io.BytesIO()
        Image.fromarray(crop_straight(), "RGBA").save(buffer, "WEBP", lossless=True,
                                                      method=0, quality=0)
        return buffer.getvalue()

    ms, payload = median_ms(webp, runs=7)
    out["webp"] = (ms, payload, "webp", rect)
    return out


class BusyCores:
    """Cores used between start and stop: by the whole machine (/proc/stat), by this
    process (the publisher, encoder and server) and by its child processes (Chromium and
    Playwright's driver)."""

    @staticmethod
    def _sample():
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        parents, ticks = {}, {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                after_name = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # gone meanwhile
            pid = int(stat.parent.name)
            parents[pid], ticks[pid] = int(after_name[1]), int(after_name[11]) + int(after_name[12])
        children, frontier = set(), {os.getpid()}
        while frontier:
            frontier = {pid for pid, parent in parents.items() if parent in frontier} - children
            children |= frontier
        return (sum(fields) - fields[3] - fields[4], sum(ticks[p] for p in children),
                time.process_time(), time.monotonic())

    def __enter__(self):
        self.start = self._sample()
        return self

    def __exit__(self, *exc):
        end = self._sample()
        wall = end[3] - self.start[3]
        # /proc counts in clock ticks of 1/100 s (USER_HZ).
        self.machine = (end[0] - self.start[0]) / 100 / wall
        self.children = (end[1] - self.start[1]) / 100 / wall
        self.own = (end[2] - self.start[2]) / wall


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def end_to_end(browser, encoding: str, frames: list[np.ndarray], seconds: float) -> dict:
    h, w = frames[0].shape[:2]
    source = BrowserSource(free_port(), encoding=encoding)
    source.start()
    page = browser.new_page(viewport={"width": w, "height": h})
    try:
        page.goto(source.url)
        page.wait_for_function("window.lipsyncStats.connected")
        publish_s, copy_s, n, warm_delays, warm_ready, warm_frames = [], [], 0, None, 0, 0
        scratch = np.empty_like(frames[0])
        t0 = time.perf_counter()
        with BusyCores() as busy:
            while (now := time.perf_counter()) < t0 + WARM_UP_S + seconds:
                if warm_delays is None and now >= t0 + WARM_UP_S:
                    warm_delays = len(source.delays_ms())
                    warm_ready = len(source.delays_ms("ready"))
                    warm_frames = page.evaluate("window.lipsyncStats.frames")
                    publish_s, copy_s = [], []
                start = time.perf_counter()
                source.send(frames[n % len(frames)], n / FPS)
                middle = time.perf_counter()
                np.copyto(scratch, frames[n % len(frames)])  # the baseline: a bare copy
                publish_s.append(middle - start)
                copy_s.append(time.perf_counter() - middle)
                n += 1
                time.sleep(max(0.0, t0 + n / FPS - time.perf_counter()))
        painted = page.evaluate("window.lipsyncStats.frames") - warm_frames
        delays = source.delays_ms()[warm_delays:]
        ready = source.delays_ms("ready")[warm_ready:]
        stats = source.stats()
        client = stats.clients[0]
        return {
            "delay_p50_ms": round(float(np.percentile(delays, 50)), 2),
            "delay_p99_ms": round(float(np.percentile(delays, 99)), 2),
            "painted_fps": round(painted / seconds, 1),
            "published": n, "coalesced_before_encoding": stats.coalesced,
            "dropped_for_the_page": client.dropped,
            "encode_p50_ms": round(stats.encode_p50_ms, 2),
            "publish_call_p50_ms": round(float(np.percentile(publish_s, 50)) * 1e3, 3),
            "publish_call_p99_ms": round(float(np.percentile(publish_s, 99)) * 1e3, 3),
            "bare_copy_p50_ms": round(float(np.percentile(copy_s, 50)) * 1e3, 3),
            "bare_copy_p99_ms": round(float(np.percentile(copy_s, 99)) * 1e3, 3),
            "clock_uncertainty_ms": round(client.clock_uncertainty_ms, 3),
            "machine_busy_cores": round(busy.machine, 2),
            "bench_process_cores": round(busy.own, 2),
            "browser_cores": round(busy.children, 2),
            "delays": delays, "ready": ready,
        }
    finally:
        page.close()
        source.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measured per block")
    parser.add_argument("--rounds", type=int, default=3, help="blocks per encoding and size")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    result = {"machine": describe("headless Chromium " + "software rendering (--disable-gpu)"),
              "fps": FPS, "goal_ms": round(GOAL_MS, 2), "sizes": {}}
    with chromium() as browser:
        tool = browser.new_page()
        frames = {size: avatar_frames(tool, *size) for size in SIZES}
        for (w, h), fs in frames.items():
            encoded = encodings(fs[0])
            page_ms = tool.evaluate(PAGE_COSTS, [w, h, [
                [name, kind, base64.b64encode(payload).decode(), rect]
                for name, (_, payload, kind, rect) in encoded.items()]])
            layers = [data_url(AVATAR / name) for name in (*LAYERS, MOUTHS[0])]
            state = np.zeros(STATE_FIELDS)
            state_encode_ms, blob = median_ms(state.tobytes)
            x, y, bw, bh = visible_bounds(fs[0])
            result["sizes"][f"{w}x{h}"] = {
                "visible_rect": [x, y, bw, bh],
                "encodings": {name: {"encode_ms": round(ms, 2), "bytes": len(payload),
                                     "page_decode_paint_ms": round(page_ms[name], 2)}
                              for name, (ms, payload, _, _) in encoded.items()},
                "state_in_page_estimate": {
                    "encode_ms": round(state_encode_ms, 4), "bytes": len(blob) + 32,
                    "page_paint_ms": round(tool.evaluate(STATE_PAINT, [layers, w, h]), 2)},
                "end_to_end": {},
            }
        tool.close()
        runs: dict[tuple[str, str], list[dict]] = {}
        for _ in range(args.rounds):
            for encoding in (RAW, PNG):
                for (w, h), fs in frames.items():
                    runs.setdefault((f"{w}x{h}", encoding), []).append(
                        end_to_end(browser, encoding, fs, args.seconds))
    for (size, encoding), blocks in runs.items():
        delays = [d for b in blocks for d in b["delays"]]
        ready = [d for b in blocks for d in b["ready"]]
        p50, p99 = float(np.percentile(delays, 50)), float(np.percentile(delays, 99))
        result["sizes"][size]["end_to_end"][encoding] = {
            "delay_p50_ms": round(p50, 2), "delay_p99_ms": round(p99, 2),
            "ready_p50_ms": round(float(np.percentile(ready, 50)), 2),
            "ready_p99_ms": round(float(np.percentile(ready, 99)), 2),
            "meets_goal_p50": p50 <= GOAL_MS, "meets_goal_p99": p99 <= GOAL_MS,
            "painted_fps": round(float(np.mean([b["painted_fps"] for b in blocks])), 1),
            "blocks": [{k: v for k, v in b.items() if k not in ("delays", "ready")}
                       for b in blocks]}
    publish(result, args.out)


if __name__ == "__main__":
    main()
