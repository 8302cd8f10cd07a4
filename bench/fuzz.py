"""The property tests and fuzz targets of tests/test_fuzz_*.py (issue 26), run for minutes
rather than the suite's seconds: round after round, each test tries SCALE times the
examples it tries in `make test`, from a new random seed each round (the suite's are
fixed), against the same real components (the headless app's API, the browser source,
the real voice, the file formats' own readers).

Counts every input each target tried and records every failure: the test, its error's
last line and the falsifying example hypothesis shrank it to. Prints one JSON object on
the last line; --out keeps a copy (bench/results/fuzz_*.json).

    python bench/fuzz.py --minutes 10 --out bench/results/fuzz_vm_2core_epyc.json

No baseline to compare with here: what a user would otherwise run is the suite's fixed
examples, whose count per target this reports beside the inputs tried.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import describe, publish  # noqa: E402

FILES = ("tests/test_fuzz_text.py", "tests/test_fuzz_cues.py", "tests/test_fuzz_config.py",
         "tests/test_fuzz_servers.py")


class _Counting:
    """A pytest plugin: counts the inputs each hypothesis test runs (its inner test, which
    hypothesis calls once per example) and keeps each failure's report."""

    def __init__(self) -> None:
        self.inputs: Counter[str] = Counter()
        self.failures: list[dict] = []

    def pytest_collection_modifyitems(self, items) -> None:
        for item in items:
            handle = getattr(item.obj, "hypothesis", None)
            # Each round collects the same (already imported) functions: wrap them once.
            if handle is None or getattr(handle.inner_test, "counted", False):
                continue
            name = item.nodeid.split("::")[-1].split("[")[0]
            inner = handle.inner_test

            def counted(*args, _inner=inner, _name=name, **kwargs):
                self.inputs[_name] += 1
                return _inner(*args, **kwargs)

            counted.counted = True
            handle.inner_test = counted

    def pytest_runtest_logreport(self, report) -> None:
        if report.failed:
            text = str(report.longrepr)
            lines = [line for line in text.splitlines() if line.strip()]
            # Hypothesis reports distinct failures as an exception group, whose last line
            # is a frame ("    +-----"): its failures' own errors ("    | AssertionError: ...").
            errors = [line.strip(" |") for line in lines
                      if re.match(r"\s+\| \w+(Error|Exception)\b", line)]
            error = "; ".join(errors) if "ExceptionGroup" in text and errors else (
                lines[-1] if lines else "")
            self.failures.append({"test": report.nodeid, "when": report.when,
                                  "error": error[:300],
                                  "example": "\n".join(_example(lines))[:2000] or text[-2000:]})


def _example(lines: list[str]) -> list[str]:
    """The falsifying examples in a failure's report: hypothesis writes each over several
    lines ("Failing test case: counted(", one argument a line, ")"), each with the
    prefix of the first ("E", or "    |" for each of the distinct failures of an
    exception group)."""
    out: list[str] = []
    for k, line in enumerate(lines):
        found = re.search(r"Falsifying|Failing", line)
        if not found:
            continue
        prefix = line[:found.start()].rstrip()
        out.append(line)
        for more in lines[k + 1:]:
            if not more.startswith(prefix) or re.search(r"Falsifying|Failing", more):
                break
            out.append(more)
            if more[len(prefix):].strip() == ")":
                break
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0,
                        help="start no new round after this long (a round runs to its end)")
    parser.add_argument("--scale", type=int, default=3,
                        help="each test's suite examples times this, per round")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    # Read by tests/fuzzing.py as pytest imports the tests.
    os.environ["LIPSYNC_FUZZ_SCALE"] = str(args.scale)
    import pytest

    plugin = _Counting()
    seeds: list[int] = []
    start = time.monotonic()
    while time.monotonic() - start < args.minutes * 60 or not seeds:
        seed = random.SystemRandom().randrange(2**32)
        seeds.append(seed)
        pytest.main(["-q", "-p", "no:cacheprovider", f"--hypothesis-seed={seed}",
                     "--rootdir", str(ROOT), *[str(ROOT / f) for f in FILES]], plugins=[plugin])
    wall = time.monotonic() - start
    publish({
        "benchmark": "fuzz",
        "machine": describe("shared with other jobs"),
        "minutes_asked": args.minutes,
        "wall_s": round(wall, 1),
        "rounds": len(seeds),
        "seeds": seeds,
        "scale": args.scale,
        "inputs": dict(sorted(plugin.inputs.items())),
        "inputs_total": sum(plugin.inputs.values()),
        "crashes": plugin.failures,
    }, args.out)
    return 1 if plugin.failures else 0


if __name__ == "__main__":
    sys.exit(main())
