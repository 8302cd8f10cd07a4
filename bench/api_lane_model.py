"""How the device lane's batch sizing moves 50 API clients' first bytes, without a GPU:
the real app, API and clients, with the voice's engines replaced by stand-ins that sleep
a lent H100's run time per batch size (bench/lane_model). Batches padded to the next size
(every waiting request up to 64, as before) against batches sized by the sizes' run times
(pipeline.infer.engine.batch_count), alternated in one run. A model of the scheduling
alone: bench/gpu.py --sections api measures the real thing on a GPU.

    python bench/api_lane_model.py [--runs 5]

Prints a line per app and the report as JSON on the last line."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api import MODE, _percentiles, concurrent  # noqa: E402
from bench.machine import describe  # noqa: E402
from tests.harness.app_process import HeadlessApp, cli, free_port  # noqa: E402

STAND_INS = Path(__file__).resolve().parent / "lane_model"
POLICIES = ("padded", "measured")


def fifty_clients(policy: str, clients: int) -> dict:
    config = Path(tempfile.mkdtemp(prefix="bench-lane-"))
    made = cli(config, "api", "token", "create", "bench")
    if made.returncode != 0:
        raise RuntimeError(f"the app made no API token: {made.stderr.strip()}")
    port = free_port()
    path = os.pathsep.join(p for p in (str(STAND_INS), os.environ.get("PYTHONPATH")) if p)
    app = HeadlessApp(config, {"mic_enabled": False, "latency_mode": MODE},
                      "--api-port", str(port),
                      environment={"PYTHONPATH": path, "LANE_POLICY": policy})
    try:
        app.output.until("Voice ready", 300)
        app.base, app.token = f"http://127.0.0.1:{port}", made.stdout.strip()
        concurrent(app, 1)
        # Once with every client, so the stand-ins have each text's acoustic rows: the
        # measured burst then spends no CPU on the acoustic model, as a GPU would not.
        concurrent(app, clients)
        ttfbs, late, _ = concurrent(app, clients)
    finally:
        app.stop()
    p50, p99 = _percentiles(ttfbs)
    return {"policy": policy, "ttfb_p50_ms": p50, "ttfb_p99_ms": p99, "underruns": int(late)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--clients", type=int, default=50)
    args = parser.parse_args()
    rows = []
    for _ in range(args.runs):
        for policy in POLICIES:
            rows.append(fifty_clients(policy, args.clients))
            print(json.dumps(rows[-1]), flush=True)
    report = {"machine": describe("no GPU: the engines are stand-ins"), "mode": MODE,
              "clients": args.clients, "runs": rows}
    for policy in POLICIES:
        mine = [r for r in rows if r["policy"] == policy]
        for key in ("ttfb_p50_ms", "ttfb_p99_ms", "underruns"):
            report[f"{policy}_{key}"] = [r[key] for r in mine]
    for key in ("ttfb_p50_ms", "ttfb_p99_ms"):
        report[f"{key}_measured_over_padded"] = round(
            float(np.median(report[f"measured_{key}"]) / np.median(report[f"padded_{key}"])), 3)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
