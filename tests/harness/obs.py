"""A real OBS Studio for tests: its own HOME, a window manager and obs-websocket v5 with a
password, on the harness's Xvfb display (tests/harness/services.py).

Why each piece (shared/recipes/testing.md, "A real OBS", and what this harness found):
- openbox runs on the display first: OBS's XComposite window capture needs an EWMH
  window manager and checks for one once, when the capture source is created ("window
  manager does not support Extended Window Manager Hints (EWMH). XComposite capture
  disabled." otherwise).
- `global.ini` is written before OBS starts: `FirstRun=true` skips the wizard, the
  `[OBSWebSocket]` section turns the server on at a free port with a password and no
  pop-ups.
- OBS and openbox run in process groups of their own that die with the test process
  (PR_SET_PDEATHSIG), so a crashed or killed test run leaves neither behind.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import obsws_python

# OBS 29 under Xvfb on llvmpipe answered on its websocket 4-9 s after exec on this 2-core
# VM (idle to loaded); 45 s leaves room for a machine busy with other test runs.
START_TIMEOUT_S = 45.0


def _die_with_parent() -> None:
    """In the child before exec: its own process group (so stop() reaches OBS's helper
    processes too), and SIGTERM when the test process dies."""
    import ctypes

    os.setpgid(0, 0)
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def free_port() -> int:
    """A TCP port nothing listens on now (the kernel's pick for port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _stop_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # Helpers OBS started in its group may outlive it.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class WindowManager:
    """openbox on ``display``, once it owns the EWMH check window."""

    def __init__(self, display: str) -> None:
        if shutil.which("openbox") is None:
            raise RuntimeError("openbox is not installed (the test packages include it)")
        self.display = display
        deadline = time.monotonic() + 10
        while True:
            # openbox writes its messages to stdout; a file, which never fills up as a pipe can.
            self._messages = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(
                ["openbox", "--sm-disable"], env=dict(os.environ, DISPLAY=display),
                stdout=self._messages, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
            while not self._ewmh_ready() and self.proc.poll() is None:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("openbox did not set _NET_SUPPORTING_WM_CHECK within 10 s")
                time.sleep(0.05)
            if self.proc.poll() is None:
                return
            self._messages.seek(0)
            said = self._messages.read().decode(errors="replace").strip()
            self._messages.close()
            # An X server resets when its last client leaves (Xvfb without -noreset, as the
            # harness starts it) and drops connections made meanwhile: openbox, connecting
            # right after another client such as xprop left, then says this. Seen here.
            if "Failed to open the display" not in said or time.monotonic() > deadline:
                raise RuntimeError(f"openbox exited with {self.proc.returncode}: {said}")
            time.sleep(0.1)

    def _ewmh_ready(self) -> bool:
        out = subprocess.run(["xprop", "-root", "-display", self.display, "_NET_SUPPORTING_WM_CHECK"],
                             capture_output=True, text=True).stdout
        return "window id" in out

    def stop(self) -> None:
        _stop_group(self.proc)
        self._messages.close()


class Obs:
    """OBS Studio with obs-websocket on ``port`` (password ``password``), HOME ``home``.

    ``websocket=False`` starts it with the websocket server off (what a user who never
    enabled it has). ``restart()`` starts it again with the same HOME and settings.
    """

    def __init__(self, display: str, home: Path, *, port: int | None = None,
                 password: str = "test-obs-password", websocket: bool = True) -> None:
        if shutil.which("obs") is None:
            raise RuntimeError("obs is not installed (the test packages include obs-studio)")
        self.display = display
        self.home = Path(home)
        self.port = port or free_port()
        self.password = password
        self.websocket = websocket
        self._write_config()
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def config(self) -> Path:
        return self.home / ".config" / "obs-studio"

    def _write_config(self) -> None:
        self.config.mkdir(parents=True, exist_ok=True)
        (self.config / "global.ini").write_text(
            "[General]\nFirstRun=true\n\n"
            "[OBSWebSocket]\nFirstLoad=false\n"
            f"ServerEnabled={'true' if self.websocket else 'false'}\nServerPort={self.port}\n"
            "AlertsEnabled=false\nAuthRequired=true\n"
            f"ServerPassword={self.password}\n", encoding="utf-8")

    def start(self) -> None:
        env = dict(os.environ, HOME=str(self.home), XDG_CONFIG_HOME=str(self.home / ".config"),
                   DISPLAY=self.display)
        self.proc = subprocess.Popen(
            # --multi: no "OBS is already running" question when a test starts a second
            # one; --verbose: debug lines in its log, which the tests read.
            ["obs", "--disable-shutdown-check", "--minimize-to-tray", "--multi", "--verbose"],
            env=env, cwd=self.home,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        if self.websocket:
            self.wait_for_websocket()
        else:
            self.wait_for_log("obs-websocket")

    def wait_for_websocket(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until obs-websocket greets with its v5 Hello (not just until the port opens)."""
        from websocket import create_connection

        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"OBS exited with {self.proc.returncode}; log: {self.log_tail()}")
            try:
                ws = create_connection(f"ws://127.0.0.1:{self.port}", timeout=5)
                try:
                    if '"op":0' in ws.recv().replace(" ", ""):
                        return
                finally:
                    ws.close()
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"OBS's websocket did not answer within {timeout:g} s; "
                                   f"log: {self.log_tail()}")
            time.sleep(0.2)

    def wait_for_log(self, text: str, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if self.proc.poll() is not None:
                raise RuntimeError(f"OBS exited with {self.proc.returncode}; log: {self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"OBS's log did not say {text!r} within {timeout:g} s")
            time.sleep(0.2)

    def log(self) -> str:
        """The newest OBS log of this HOME ('' before OBS wrote one)."""
        logs = sorted((self.config / "logs").glob("*.txt"), key=lambda p: p.stat().st_mtime)
        return logs[-1].read_text(encoding="utf-8", errors="replace") if logs else ""

    def log_tail(self, chars: int = 2000) -> str:
        return self.log()[-chars:]

    def kill(self) -> None:
        """As OBS crashing or being killed: SIGKILL, no goodbye on the websocket."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.proc is not None:
            _stop_group(self.proc)


# The chroma key colour the OBS tests set (tests/test_obs_setup.py's avatar stand-in has it
# as its right half), and the name of the microphone input they add to OBS.
KEY = "#12ab34"
MIC = "Test mic"


def connect(obs: Obs) -> obsws_python.ReqClient:
    """The test's own view of OBS, straight through obsws-python."""
    return obsws_python.ReqClient(host="127.0.0.1", port=obs.port, password=obs.password, timeout=10)
