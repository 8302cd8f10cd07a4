"""Real services for tests: an X server (Xvfb) with Mesa GL and a JACK server with the
dummy driver, started by the tests themselves (CI has neither display nor sound card)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JACK_RATE = 48000
# 10.7 ms periods, as desktop sound servers commonly run: with 5.3 ms ones, Python
# callbacks on this 2-core VM missed cycles (xruns) often enough to break bit-exact tests.
JACK_PERIOD = 512


def _die_with_parent() -> None:
    """Runs in the child before exec: a test run that crashes or is killed must not leave
    X or JACK servers behind (PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def _free_display() -> int:
    for n in range(90, 200):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            return n
    raise RuntimeError("no free X display number between :90 and :199")


class Xvfb:
    """An Xvfb server on a free display; `display` is the DISPLAY value."""

    def __init__(self, size: str = "1280x720x24") -> None:
        if shutil.which("Xvfb") is None:
            raise RuntimeError("Xvfb is not installed (make test installs it)")
        n = _free_display()
        self.display = f":{n}"
        self.proc = subprocess.Popen(
            ["Xvfb", self.display, "-screen", "0", size, "-nolisten", "tcp"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + 10
        while not Path(f"/tmp/.X11-unix/X{n}").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"Xvfb did not start: {err}")
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)


class JackServer:
    """jackd with the dummy driver: exact pacing, no sound card needed.

    Runs under its own server name so it never touches a user's real JACK server.
    """

    def __init__(self, rate: int = JACK_RATE, period: int = JACK_PERIOD) -> None:
        if shutil.which("jackd") is None:
            raise RuntimeError("jackd is not installed (make test installs jackd2)")
        self.name = f"lsstest{os.getpid()}"
        self.rate = rate
        self.period = period
        self._tmp = tempfile.mkdtemp(prefix="lss-jack-")
        env = dict(os.environ, JACK_NO_AUDIO_RESERVATION="1")
        self.proc = subprocess.Popen(
            ["jackd", "-n", self.name, "-R", "-d", "dummy", "-r", str(rate), "-p", str(period),
             "-C", "2", "-P", "2"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, preexec_fn=_die_with_parent,
        )
        self._wait_ready()
        # PortAudio's JACK host API and JACK-Client both connect to the server named here.
        os.environ["JACK_DEFAULT_SERVER"] = self.name
        os.environ["JACK_NO_START_SERVER"] = "1"

    def _wait_ready(self) -> None:
        import jack

        deadline = time.monotonic() + 15
        while True:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"jackd exited: {err}")
            try:
                client = jack.Client("lss-probe", servername=self.name, no_start_server=True)
                client.close()
                return
            except jack.JackError:
                if time.monotonic() > deadline:
                    raise RuntimeError("jackd did not accept clients within 15 s")
                time.sleep(0.1)

    def stop(self) -> None:
        os.environ.pop("JACK_DEFAULT_SERVER", None)
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self._tmp, ignore_errors=True)


def run_in_child(target: str, timeout: float) -> tuple[subprocess.CompletedProcess, dict]:
    """Run ``target`` ("tests.module:function", which prints JSON on its last line) in a
    Python process of its own: for tests that stop or restart a sound server, which
    would upset the tests sharing this process's, and for those that could crash it (a
    crash then fails the test, saying which signal, with the child's Python tracebacks).
    Returns the finished child and its JSON."""
    module, function = target.split(":")
    child = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", f"from {module} import {function}; {function}()"],
        capture_output=True, text=True, timeout=timeout,
        cwd=Path(__file__).resolve().parent.parent.parent)
    if child.returncode < 0:
        ended = f"was killed by {signal.Signals(-child.returncode).name}"
    else:
        ended = f"exited with {child.returncode}"
    assert child.returncode == 0, f"{target} {ended}:\n{child.stderr[-3000:]}"
    return child, json.loads(child.stdout.strip().splitlines()[-1])
