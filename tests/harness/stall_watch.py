"""Whether the machine itself stopped running this process's threads for a while.

A JACK cycle is lost (an xrun) when some client does not finish within its period. On a
virtual machine that can happen with no fault of the app's: the hypervisor runs another
guest on our CPUs (steal), or the kernel does long non-preemptible work there, and every
thread on such a CPU, the sound server's real-time ones included, stops for as long.

`StallWatch` tells those apart from the app's own lateness, two ways:

- The steal the kernel reports (/proc/stat): time our CPUs were ready to run and the
  hypervisor ran something else. A client stopped for part of a period, with the rest of
  its cycle's work still to do, can miss the cycle too: in one stretch on the development
  VM the JACK A/V test failed with 0.24-0.44 cores of steal in each take, one of them
  with no stall of a whole period, and passed in 5 runs after it with none; CI's takes
  that failed it had 0.2-0.4 cores of other work, this included, and xruns in each.
- Stalls of a JACK period or more, seen from inside: one small process on each CPU,
  pinned there, at a real-time priority above the JACK server's (jackd -R runs its threads
  at 10), sleeps 1 ms at a time and notes each wake-up that came that late. Nothing in
  the app can delay it through the scheduler: not its threads, whatever their priority
  under JACK's, and not the GIL, which it does not share. So a stall it sees is one the
  CPU had, reported or not as steal. Where real-time scheduling is not permitted the
  watch says so and sees no stalls: at normal priority the app's own threads would delay
  it, and it would excuse the app's faults.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from tests.harness.services import JACK_PERIOD, JACK_RATE

# Above jackd -R's default real-time priority (10), so JACK's own threads cannot delay it.
PRIORITY = 20
# How long each probe sleeps: a tenth of a 10.7 ms JACK period, so a stall of a period is
# seen to within a tenth. Measured on the 2-core VM: the two probes took 0.36 CPU-seconds
# in 10 s, 1.8% of a core each, and their wake-ups cost the VM about as much again in steal
# (the machine's own CPU counters, sampled at each tick, see little of their short runs).
NAP = 0.001
# Steal, in cores, above which the hypervisor is taken to have run other guests on ours:
# the probes' own wake-ups cost a quiet VM 0.04 cores of it (measured over 10 s); the
# takes of the stretch that failed the A/V test had 0.24-0.44.
STEAL_CORES = 0.1
_REPO = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class Stall:
    cpu: int
    start: float  # time.monotonic() when the probe went to sleep
    end: float  # when it woke up, NAP + the stall later

    @property
    def seconds(self) -> float:
        return self.end - self.start - NAP


class StallWatch:
    """How the machine stopped under this process while in use: the hypervisor's steal,
    and stalls of at least ``threshold`` seconds (a JACK test server's period unless told)
    on any of its CPUs.

    After the block: ``stalls`` (all CPUs', by start), ``realtime`` (whether the
    probes ran at real-time priority: without it ``stalls`` is empty) and ``steal`` (the
    hypervisor's, in cores over the block).
    """

    def __init__(self, threshold: float = JACK_PERIOD / JACK_RATE) -> None:
        self.threshold = threshold
        self.stalls: list[Stall] = []
        self.realtime = False
        self.steal = 0.0
        self._probes: list[subprocess.Popen] = []
        self._start = (0.0, 0.0)

    def __enter__(self) -> StallWatch:
        for cpu in sorted(os.sched_getaffinity(0)):
            self._probes.append(subprocess.Popen(
                [sys.executable, "-c", f"from {__name__} import probe; probe({cpu}, {self.threshold})"],
                stdout=subprocess.PIPE, text=True, cwd=_REPO))
        for proc in self._probes:  # each says it is ready once it runs where and as it should
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a stall probe did not start: exit {proc.wait()}")
        self._start = _steal_now()
        return self

    def __exit__(self, *exc) -> None:
        wall, steal = (b - a for a, b in zip(self._start, _steal_now()))
        self.steal = steal / wall
        reports = []
        for proc in self._probes:
            proc.send_signal(signal.SIGTERM)
        for proc in self._probes:
            out, _ = proc.communicate(timeout=10)
            reports.append(json.loads(out.strip().splitlines()[-1]))
        self.realtime = all(r["realtime"] for r in reports)
        if self.realtime:
            self.stalls = sorted((Stall(r["cpu"], a, b) for r in reports for a, b in r["stalls"]),
                                 key=lambda s: s.start)

    @property
    def stalled(self) -> bool:
        """Whether the machine stopped under this process while watched."""
        return bool(self.stalls) or self.steal > STEAL_CORES

    def __str__(self) -> str:
        said = f"hypervisor's steal {self.steal:.2f} cores, "
        if not self.realtime:
            return said + "stalls not watched (no real-time scheduling here)"
        if not self.stalls:
            return said + "no stall"
        longest = max(stall.seconds for stall in self.stalls)
        return said + f"{len(self.stalls)} stall(s) up to {1000 * longest:.0f} ms"


_CPU_TIME_KINDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def machine_cpu_seconds() -> dict[str, float]:
    """The CPU time of all CPUs so far by kind, in seconds (the first line of /proc/stat)."""
    with open("/proc/stat", encoding="ascii") as f:
        ticks = f.readline().split()[1:1 + len(_CPU_TIME_KINDS)]
    tick = os.sysconf("SC_CLK_TCK")
    return {kind: int(n) / tick for kind, n in zip(_CPU_TIME_KINDS, ticks)}


def process_tree_cpu_seconds(root: int) -> float:
    """The CPU time so far (user + system) of process `root` and every living process
    under it: a test's own servers, app and browser, against the machine's whole."""
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo.extend(children.get(pid, ()))
    return total


def _steal_now() -> tuple[float, float]:
    return time.monotonic(), machine_cpu_seconds()["steal"]


def every_take_missed(watches: list[StallWatch], missed: str) -> NoReturn:
    """Ends a test each of whose takes missed (``missed`` says how), saying what the watch
    saw in each: skipped where the machine stalled in every take, since the test could not
    tell the app's fault from the machine's; failed otherwise."""
    import pytest

    seen = "; ".join(map(str, watches))
    if watches and all(watch.stalled for watch in watches):
        pytest.skip(f"{missed}, and the machine stalled in every take ({seen}): it could not "
                    "be told whether the app would have kept up")
    pytest.fail(f"{missed} ({seen})")


def probe(cpu: int, threshold: float) -> None:
    """The child: pinned to ``cpu``, real-time where permitted, until SIGTERM; prints its
    stalls as JSON."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    os.sched_setaffinity(0, {cpu})
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PRIORITY))
        realtime = True
    except PermissionError:
        realtime = False
    print("ready", flush=True)
    stalls = []
    while not stop:
        start = time.monotonic()
        time.sleep(NAP)
        end = time.monotonic()
        if end - start - NAP >= threshold:
            stalls.append((start, end))
    print(json.dumps({"cpu": cpu, "realtime": realtime, "stalls": stalls}))
