"""Real services for tests: an X server (Xvfb) with Mesa GL and a JACK server with the
dummy driver, started by the tests themselves (CI has neither display nor sound card)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
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


class Xvfb:
    """An Xvfb server on a free display; `display` is the DISPLAY value.

    Xvfb picks the display number itself and tells it through -displayfd: choosing a
    number here and starting Xvfb on it raced with other test runs doing the same.
    -noreset: without it Xvfb resets when its last client leaves, dropping connections
    being made meanwhile (openbox failed with "Failed to open the display" that way)."""

    def __init__(self, size: str = "1280x720x24") -> None:
        if shutil.which("Xvfb") is None:
            raise RuntimeError("Xvfb is not installed (make test installs it)")
        read_end, write_end = os.pipe()
        try:
            self.proc = subprocess.Popen(
                ["Xvfb", "-displayfd", str(write_end), "-screen", "0", size, "-nolisten", "tcp",
                 "-noreset"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_die_with_parent,
                pass_fds=(write_end,),
            )
        finally:
            os.close(write_end)
        try:
            number = self._read_display(read_end)
        finally:
            os.close(read_end)
        self.display = f":{number}"

    def _read_display(self, fd: int) -> int:
        """The number Xvfb writes once it accepts connections (10 s at most)."""
        import select

        deadline, text = time.monotonic() + 10, b""
        while not text.endswith(b"\n"):
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 16) if ready else b""
            if not chunk:
                self.proc.kill()
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"Xvfb did not start: {err}")
            text += chunk
        return int(text)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)


# jack2 registers each running server in shared memory, eight at most. A server whose
# client process crashed can stay registered after it exits (here after 1 in 3 aborts of
# a test process with a PortAudio stream, and after every run killed by a timeout), and
# with eight such entries no server starts ("Too many servers already active"), for every
# user of the machine until it reboots. jack2
# frees an entry when a server of the same name starts and finds the registered process
# gone, so that is how the harness frees them.
_JACK_REGISTRY = Path("/dev/shm/jack-shm-registry")
TEST_SERVER_PREFIX = "lsstest"


def _registered() -> dict[str, int]:
    """Server name -> process id, from jack2 1.9.21's registry, whose entries are a pid_t
    followed by the name "jack-UID:NAME:"."""
    try:
        registry = _JACK_REGISTRY.read_bytes()
    except OSError:
        return {}
    return {entry.group(1).decode():
            int.from_bytes(registry[entry.start() - 4:entry.start()], "little", signed=True)
            for entry in re.finditer(rb"jack-\d+:([^:\0]+):", registry)}


def stale_test_servers() -> list[str]:
    """Names of the harness's servers still registered for a process that is gone."""
    return [name for name, pid in _registered().items()
            if name.startswith(TEST_SERVER_PREFIX) and pid > 0 and not Path(f"/proc/{pid}").exists()]


def _run_jackd(name: str, rate: int, period: int) -> subprocess.Popen:
    env = dict(os.environ, JACK_NO_AUDIO_RESERVATION="1")
    return subprocess.Popen(
        ["jackd", "-n", name, "-R", "-d", "dummy", "-r", str(rate), "-p", str(period),
         "-C", "2", "-P", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, preexec_fn=_die_with_parent,
    )


def _exited(proc: subprocess.Popen) -> RuntimeError:
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    return RuntimeError(f"jackd exited: {err}")


def _start_jackd(name: str, rate: int = JACK_RATE, period: int = JACK_PERIOD) -> subprocess.Popen:
    """A jackd with the dummy driver under server name ``name``, accepting clients."""
    import jack

    proc = _run_jackd(name, rate, period)
    deadline = time.monotonic() + 15
    while True:
        if proc.poll() is not None:
            raise _exited(proc)
        try:
            client = jack.Client("lss-probe", servername=name, no_start_server=True)
            client.close()
            return proc
        except jack.JackError:
            if time.monotonic() > deadline:
                stop_jackd(proc)
                raise RuntimeError("jackd did not accept clients within 15 s")
            time.sleep(0.1)


def _start_jackd_apart(name: str, rate: int, period: int) -> subprocess.Popen:
    """As _start_jackd, but told ready by a JACK client of another process (jack_wait):
    libjack keeps one server's state per process, and a client of this process on a second
    server (beside the PortAudio of the tests' own) crashed this process."""
    proc = _run_jackd(name, rate, period)
    waited = subprocess.run(["jack_wait", "--server", name, "--wait", "--timeout", "15"],
                            capture_output=True, text=True,
                            env=dict(os.environ, JACK_NO_START_SERVER="1"))
    if proc.poll() is not None:
        raise _exited(proc)
    if waited.returncode != 0:
        stop_jackd(proc)
        raise RuntimeError(f"jackd did not accept clients within 15 s: {waited.stdout}")
    return proc


def registered_jackd(name: str) -> subprocess.Popen:
    """A jackd under server name ``name``, once jack2 has registered it. Without opening a
    client: libjack keeps one server's state per process, and a client of this process on
    another server segfaulted when this one was killed."""
    proc = _run_jackd(name, JACK_RATE, JACK_PERIOD)
    deadline = time.monotonic() + 15
    while _registered().get(name) != proc.pid:
        if proc.poll() is not None:
            raise _exited(proc)
        if time.monotonic() > deadline:
            stop_jackd(proc)
            raise RuntimeError("jackd did not register within 15 s")
        time.sleep(0.01)
    return proc


def stop_jackd(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_stale_test_servers() -> None:
    """Start and stop a server under each stale name: jack2 then drops its entry."""
    for name in stale_test_servers():
        try:
            stop_jackd(registered_jackd(name))
        except RuntimeError:
            pass  # taken again meanwhile, by a run restarting its server under that name


class JackServer:
    """jackd with the dummy driver: exact pacing, no sound card needed.

    Runs under its own server name so it never touches a user's real JACK server. The
    process's default server (JACK_DEFAULT_SERVER, for PortAudio and JACK-Client), unless
    ``suffix`` names another one beside it: a server for an app in a process of its own
    (``environment`` is what that process needs to use it), which the test may stop,
    kill and start again without upsetting the clients of this process's own.
    """

    def __init__(self, rate: int = JACK_RATE, period: int = JACK_PERIOD, suffix: str = "") -> None:
        if shutil.which("jackd") is None:
            raise RuntimeError("jackd is not installed (make test installs jackd2)")
        self.name = f"{TEST_SERVER_PREFIX}{os.getpid()}{suffix}"
        self.rate = rate
        self.period = period
        self.default = not suffix
        self.start()
        # PortAudio's JACK host API and JACK-Client both connect to the server named here.
        if self.default:
            os.environ.update(self.environment)

    @property
    def environment(self) -> dict[str, str]:
        return {"JACK_DEFAULT_SERVER": self.name, "JACK_NO_START_SERVER": "1"}

    def start(self) -> None:
        """(Again, after stop or kill: its clients find it under the same name.)"""
        start = _start_jackd if self.default else _start_jackd_apart
        try:
            self.proc = start(self.name, self.rate, self.period)
        except RuntimeError as exc:
            if "Too many servers" not in str(exc):
                raise
            free_stale_test_servers()
            self.proc = start(self.name, self.rate, self.period)

    def kill(self) -> None:
        """As a sound server crashing: SIGKILL, its clients told nothing."""
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.default:
            os.environ.pop("JACK_DEFAULT_SERVER", None)
        stop_jackd(self.proc)


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
