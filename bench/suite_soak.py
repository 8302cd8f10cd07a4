"""The whole suite, many times over, and every test module alone: failures and crashes.

Each `make test` and each module runs as a fresh process tree (its own Xvfb and JACK server,
as CI starts them). A crash is a run killed by a signal (a segfault in PortAudio's
re-initialisation was the one seen), or one whose output shows a fatal error, whatever its
exit code. `python bench/suite_soak.py --runs 10 --out bench/results/suite_soak.json`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import describe, publish  # noqa: E402

CRASH_MARKS = ("Fatal Python error", "Segmentation fault", "core dumped", "Aborted",
               "terminate called")
CLOSING = re.compile(r"\d+ (passed|failed|errors?)\b.* in [\d.]+s")
SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")


def summary_counts(output: str) -> dict[str, int]:
    """pytest's closing counts: its last line that ends "in N.NNs" (make may print after it)."""
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    closing = [line for line in output.splitlines() if CLOSING.search(line)]
    for n, kind in SUMMARY.findall(closing[-1] if closing else ""):
        key = "errors" if kind.startswith("error") else kind
        counts[key] = counts.get(key, 0) + int(n)
    return counts


def run(cmd: list[str], log: Path) -> dict:
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace")
    wall = time.monotonic() - started
    log.write_text(proc.stdout)
    counts = summary_counts(proc.stdout)
    # make reports a child killed by a signal as "Error 139" (128 + SIGSEGV) and exits 2.
    signalled = proc.returncode < 0 or re.search(r"Error 1(3[4-9]|[45]\d)\b", proc.stdout)
    crashed = bool(signalled) or any(m in proc.stdout for m in CRASH_MARKS)
    return {"cmd": " ".join(cmd[2:]), "rc": proc.returncode, "wall_s": round(wall, 1),
            "crashed": crashed, **counts, "log": str(log.relative_to(ROOT))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--logs", type=Path, default=ROOT / "test-output" / "soak")
    parser.add_argument("--also-python", action="append", default=[], metavar="PATH",
                        help="first run the suite once on this interpreter too, in a venv of "
                             "its own (make test PYTHON=PATH VENV=.venv-X.Y); repeatable")
    parser.add_argument("--budget-s", type=float, default=float("inf"),
                        help="start no further suite run once it would end past this many "
                             "seconds from the start, by the longest run so far")
    args = parser.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    python = str(ROOT / ".venv" / "bin" / "python")

    started = time.monotonic()
    others: list[dict] = []
    suites: list[dict] = []
    modules: list[dict] = []

    def result() -> dict:
        bad = [r for r in others + suites + modules if r["rc"] != 0 or r["crashed"]]
        return {
            "machine": describe(),
            "module_runs": len(modules),
            "module_failures": sum(r["failed"] + r["errors"] for r in modules),
            "module_crashes": sum(r["crashed"] for r in modules),
            "suite_runs": len(suites),
            "suite_runs_asked": args.runs,
            "suite_failures": sum(r["failed"] + r["errors"] for r in suites),
            "suite_crashes": sum(r["crashed"] for r in suites),
            "suite_wall_s": [r["wall_s"] for r in suites],
            "other_pythons": [{k: r[k] for k in ("python", "rc", "crashed", "passed", "failed",
                                                 "errors", "skipped", "wall_s")} for r in others],
            "runs_not_clean": [{k: r[k] for k in ("cmd", "rc", "crashed", "failed", "errors", "log")}
                               for r in bad],
            "modules": modules,
            "suites": suites,
        }

    def record(where: list[dict], entry: dict) -> None:
        where.append(entry)
        print(entry, file=sys.stderr)
        if args.out is not None:  # after every run, so a soak cut short still has its figures
            args.out.write_text(json.dumps(result(), indent=2) + "\n")

    # Every module alone first: a module that crashes only on its own is what a user's
    # single command (or CI's first test) would meet.
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        rel = str(path.relative_to(ROOT))
        record(modules, run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", rel],
                            args.logs / f"{path.stem}.log"))
    for interpreter in args.also_python:
        version = subprocess.run([interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        record(others, run(["make", "-s", "test", f"PYTHON={interpreter}", f"VENV=.venv-{version}"],
                           args.logs / f"suite-py{version}.log") | {"python": version})
    for i in range(args.runs):
        longest = max((r["wall_s"] for r in suites), default=0.0)
        if time.monotonic() - started + longest > args.budget_s:
            print(f"budget: stopping after {i} suite runs", file=sys.stderr)
            break
        record(suites, run(["make", "-s", "test"], args.logs / f"suite-{i}.log"))

    final = result()
    publish(final, args.out)
    sys.exit(1 if final["runs_not_clean"] else 0)


if __name__ == "__main__":
    main()
