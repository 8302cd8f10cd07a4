"""The OBS outputs in one run (issue 13): what the RGBA readback (the browser source's
feed's) adds to the render tick, the browser page's frame delay, the A/V offset of what
OBS records, and the app's CPU at 60 fps on llvmpipe with and without the avatar window.

Each part is its own benchmark, run here one after the other in fresh processes (they
share nothing, and each names its own baseline in the same run):
- bench/readback.py: the tick with PBO readback against the tick without (the baseline:
  no readback) and against a synchronous glReadPixels (what a naive capture does);
  `readback_tick_delta_ms` is the order FrameFeed uses (the frame drawn a tick ago read
  back before the next is drawn), `readback_tick_delta_immediate_ms` the other order.
  The virtual camera's readback is YUYV packed on the GPU now, not this: its figures
  come from bench/yuv_readback.py, run on its own and not part of this run;
- bench/browser_delay.py: publish → the page's paint in headless Chromium, 60 fps, PNG
  (what BrowserSource sends) at the avatar window's default 1280x720 and at 512x512,
  against raw frames;
- bench/obs_av_offset.py: a real OBS records the avatar window and our audio through
  JACK while the app speaks; mouth changes in the recording scored against their sounds;
- bench/app_cpu.py HEAD:60 against HEAD:60:window: the app idle and speaking, without and
  with the avatar window open.

Usage: python bench/outputs.py [--quick] [--out bench/results/outputs.json]
Last line of output: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.machine import describe, publish  # noqa: E402


def run(script: str, *args: str, timeout: float = 900) -> dict:
    """The last-line JSON of `bench/<script>` run with `args` (its stderr passed on)."""
    done = subprocess.run([sys.executable, str(REPO / "bench" / script), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    sys.stderr.write(done.stderr[-3000:])
    if done.returncode != 0:
        raise SystemExit(f"bench/{script} exited with {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter parts (a check, not a result)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    quick = args.quick
    machine = describe("Xvfb + Mesa llvmpipe, JACK dummy 48 kHz")

    readback = run("readback.py", "--ticks", "120" if quick else "300")
    browser = run("browser_delay.py", "--seconds", "2" if quick else "3", "--rounds", "1" if quick else "3")
    obs = run("obs_av_offset.py", "--sentences", "4" if quick else "20", timeout=1500)
    cpu = run("app_cpu.py", "--variants", "HEAD:60,HEAD:60:window",
              "--rounds", "1" if quick else "3", "--seconds", "5" if quick else "10", timeout=1500)

    end_to_end = {size: browser["sizes"][size]["end_to_end"] for size in browser["sizes"]}
    png_720 = end_to_end["1280x720"]["png"]
    base, window = (cpu["median"][name] for name in cpu["median"])
    result = {
        "bench": "outputs",
        "machine": machine,
        "quick": quick,
        "readback_tick_delta_ms": readback["readback_tick_delta_deferred_ms"],
        "readback_tick_delta_immediate_ms": readback["readback_tick_delta_ms"],
        "readback_sync_tick_delta_ms": readback["sync_readback_tick_delta_ms"],
        "readback_goal_le_1ms": readback["readback_tick_delta_deferred_ms"] <= 1.0,
        "browser_delay_p50_ms": png_720["delay_p50_ms"],
        "browser_delay_p99_ms": png_720["delay_p99_ms"],
        "browser_painted_fps": png_720["painted_fps"],
        "browser_goal_ms": browser["goal_ms"],
        "browser_end_to_end": end_to_end,
        "obs_av_offset_median_ms": obs["obs_av_offset_median_ms"],
        "obs_av_offset_p99_ms": obs["obs_av_offset_p99_ms"],
        "obs_fps": obs["obs_fps"],
        "obs": obs,
        "app_cores_60fps": {"without_avatar_window": base, "with_avatar_window": window},
        "avatar_window_cores_idle": round(window["idle"]["app_and_servers_cores"]
                                          - base["idle"]["app_and_servers_cores"], 3),
        "avatar_window_cores_speaking": round(window["speaking"]["app_and_servers_cores"]
                                              - base["speaking"]["app_and_servers_cores"], 3),
        "parts": {"readback": readback["machine"], "browser": browser["machine"],
                  "obs": obs.get("machine"), "app_cpu": cpu["machine"]},
    }
    publish(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
