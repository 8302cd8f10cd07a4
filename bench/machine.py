"""The machine a benchmark ran on, for its JSON: results are only comparable on one."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path


def describe(extra: str = "") -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    text = f"{platform.node()}: {os.cpu_count()} cores, {cpu}, load {load:.2f}"
    return f"{text}, {extra}" if extra else text


def busy_cores_seconds() -> float:
    """CPU seconds the whole machine has been busy (all cores, /proc/stat): less this
    process's own, what other work took while a benchmark ran."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def publish(result: dict, out: Path | None, indent: int | None = 2) -> None:
    """Print `result` as the one-line JSON every benchmark ends with, and keep a readable
    copy in `out` when given (the committed results under bench/results/)."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=indent) + "\n")
    print(json.dumps(result))
