"""Stalls at avatar switches, the app as it is against the app at --previous REV, in one
run: bench/soak.py's whole set-up (the real app under Xvfb with its view, the avatar
window, the browser source with a headless Chromium on it, VMC, the API's stream clients
and the JACK microphone), then `--switches` switches between the bundled sprite avatar
and a photo one, each told through the API as the soak does, and every output's stalls
and busy stalls (bench/soak.py says what each is) counted from the switch until HOLD_S
after it. No speech follows a switch, so what is counted is the switch's own. Runs of
the two variants alternate, so that the machine's load falls on both alike. The previous
revision is taken out of git whole (bench/app_cpu.extract_tree) and its app started
there.

Usage: python bench/switch_stalls.py [--runs 2] [--switches 10] [--previous REV] [--out F]
Last line of output: one JSON object.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.app_cpu import extract_tree  # noqa: E402
from bench.machine import describe, publish  # noqa: E402
from bench.soak import Soak  # noqa: E402

# Until every output has drawn its ticks after the switch: the round of uploads ends
# within ~0.1 s on the 2-vCPU VM, and the photo avatar's first frames take a few more.
HOLD_S = 0.5
# Between switches: the outputs back on their grid, and the API's clients streaming.
SETTLE_S = 1.0


def switches(workdir: Path, count: int) -> dict:
    """`count` switches on a fresh app: stalls and busy stalls of every output in each."""
    run = Soak(0, workdir)
    try:
        # The first switch to each avatar reads and uploads it for the first time.
        for action in ("speak", "avatar", "avatar"):
            run.step(action)
        rows = []
        for _ in range(count):
            time.sleep(SETTLE_S)
            before = run.stalls()
            run.avatar = 1 - run.avatar
            run.control.ask({"type": "set_avatar", "avatar": run.avatars[run.avatar]})
            time.sleep(HOLD_S)
            after = run.stalls()
            rows.append([b - a for a, b in zip(before, after)])
    finally:
        run.close()
    return {"stalls": sum(r[0] for r in rows), "busy_stalls": sum(r[1] for r in rows),
            "switches_with_a_busy_stall": sum(r[1] > 0 for r in rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs of each variant")
    parser.add_argument("--switches", type=int, default=10, help="switches in each run")
    parser.add_argument("--previous", default="245047b",
                        help="the app before its outputs got a new rig in turns of their own")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from tests.harness.services import JackServer, Xvfb

    machine = describe()
    xvfb = Xvfb()
    os.environ["DISPLAY"] = xvfb.display
    jack = JackServer()
    runs: dict[str, list[dict]] = {"current": [], "previous": []}
    try:
        with tempfile.TemporaryDirectory(prefix="switch-stalls-") as folder:
            tree = Path(folder) / "previous"
            extract_tree(args.previous, tree)
            for i in range(args.runs):
                for variant, root in (("previous", tree), ("current", REPO)):
                    # `python -m app` puts its working directory first on sys.path: the
                    # app's processes start in the variant's tree.
                    os.chdir(root)
                    workdir = Path(folder) / f"{variant}{i}"
                    workdir.mkdir()
                    runs[variant].append(switches(workdir, args.switches))
                    print(variant, runs[variant][-1], flush=True)
    finally:
        os.chdir(REPO)  # out of the tree before it is removed
        jack.stop()
        xvfb.stop()
    totals = {variant: {key: sum(r[key] for r in rows) for key in rows[0]}
              for variant, rows in runs.items()}
    publish({"bench": "switch_stalls", "machine": machine, "previous_revision": args.previous,
             "switches_per_run": args.switches, "hold_s": HOLD_S, "runs": runs,
             "totals": totals, "switches_each": args.runs * args.switches}, args.out)


if __name__ == "__main__":
    main()
