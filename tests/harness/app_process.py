"""The real app as a process of its own, as a user runs it: `lipsync-studio` (its window)
or `lipsync-studio --headless`, with its own config folder, its output read line by
line, its standard input to type on, and its threads, sockets and memory read from
/proc."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lines:
    """The process's output lines, read on a thread of their own: selecting on the pipe
    and then reading a line misses lines that arrived in the same chunk (they wait in
    the reader's buffer, where select does not look)."""

    def __init__(self, proc) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def lines(self) -> list[str]:
        """Every line so far (those not yet read by `until` taken in now)."""
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                return self.seen
            if line is None:  # the end: kept for `until`, which says so
                self._queue.put(None)
                return self.seen
            self.seen.append(line)

    def until(self, needle: str, timeout: float) -> str:
        """The first line from now on that holds `needle`."""
        end = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                raise AssertionError(f"{needle!r} never came within {timeout} s; output:\n"
                                     + "".join(self.seen))
            self.seen.append(line)
            if needle in line:
                return line


def app_environment(config_dir: Path, display: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items()
           if display or k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["LIPSYNC_STUDIO_CONFIG_DIR"] = str(config_dir)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def cli(config_dir: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`lipsync-studio ARGS` with that config folder."""
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True,
                          env=app_environment(config_dir), timeout=timeout)


class AppProcess:
    """`lipsync-studio ARGS` with `settings` in a config folder of its own: its window, on
    the display DISPLAY names, unless ARGS has --headless."""

    def __init__(self, config_dir: Path, settings: dict, *args: str,
                 environment: dict[str, str] | None = None) -> None:
        self.config_dir = config_dir
        config_dir.mkdir(parents=True, exist_ok=True)
        (config_dir / "settings.json").write_text(json.dumps(settings))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app", *args], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**app_environment(config_dir, display="--headless" not in args),
                 **(environment or {})},
            start_new_session=True)
        self.output = Lines(self.proc)

    @property
    def transcript(self) -> str:
        return "".join(self.output.seen)

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))

    def sockets(self) -> int:
        fds = f"/proc/{self.proc.pid}/fd"
        count = 0
        for fd in os.listdir(fds):
            try:
                count += os.readlink(f"{fds}/{fd}").startswith("socket:")
            except OSError:
                pass
        return count

    def cpu_seconds(self) -> float:
        """The process's CPU time so far (user + system)."""
        with open(f"/proc/{self.proc.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def stop(self) -> int:
        """Closed as the desktop closes a program (SIGTERM: the window's app has no
        handler of its own); its exit status."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                return self.proc.wait(timeout=20)
            finally:
                if self.proc.poll() is None:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
        return self.proc.returncode


class HeadlessApp(AppProcess):
    """`lipsync-studio --headless ARGS` with `settings` in a config folder of its own."""

    def __init__(self, config_dir: Path, settings: dict, *args: str,
                 environment: dict[str, str] | None = None) -> None:
        super().__init__(config_dir, settings, "--headless", *args, environment=environment)

    def type(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stop(self) -> int:
        """Ctrl-C, as a user stops it; its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.output.until("Stopped.", 20)
                return self.proc.wait(timeout=20)
            finally:
                if self.proc.poll() is None:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()
        return self.proc.returncode


def api_app(config_dir: Path, client: str, **settings) -> HeadlessApp:
    """The headless app with the API on a free port, on the test JACK server's output with
    the microphone off (and `settings` besides), its voice ready; a token for `client`
    made at the terminal first. `base` (http), `ws` (ws) and `token` are set on it."""
    made = cli(config_dir, "api", "token", "create", client)
    assert made.returncode == 0, made.stderr
    port = free_port()
    running = HeadlessApp(config_dir, {"audio_output_device": "system", "mic_enabled": False,
                                       **settings}, "--api-port", str(port))
    running.output.until(f"API on http://127.0.0.1:{port}/", 60)
    # The voice first: a speech request made while it loads waits for it (up to 60 s).
    running.output.until("Voice ready", 90)
    running.base = f"http://127.0.0.1:{port}"
    running.ws = f"ws://127.0.0.1:{port}"
    running.token = made.stdout.strip()
    return running
