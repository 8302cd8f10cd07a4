"""One connection to OBS Studio through obs-websocket 5 (obsws-python), and its policy
when OBS goes away: what app/obs/link.py's set-up steps run through.

Invariants:
- Every failure reaches the caller as ObsError, whose message is one line saying what is
  wrong and what to do; obsws-python's own logging (tracebacks) is silenced.
- An operation given to `run` must be idempotent (running it twice leaves OBS as running
  it once does): when OBS drops the connection mid-way (it quit or crashed), the
  connection comes back with a bounded backoff and the whole operation runs again,
  instead of guessing which request got through.
- One operation at a time (a lock): the settings panel calls from a worker thread while
  captions may be written from another.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import obsws_python
from obsws_python.error import OBSSDKError, OBSSDKRequestError
from websocket import WebSocketBadStatusException, WebSocketException, WebSocketTimeoutException

from app.obs.target import ENABLE_HINT

# obsws-python logs each failure with a traceback before raising it (we say each in a
# line), and every connection's parameters, the password in clear, at INFO.
logging.getLogger("obsws_python").setLevel(logging.CRITICAL + 1)

PASSWORD_HINT = "OBS shows it under Tools → WebSocket Server Settings → Show Connect Info"

# obs-websocket 5 request status codes (RequestStatus in its protocol).
NOT_FOUND = 600
ALREADY_EXISTS = 601

FIRST_RETRY_S, MAX_RETRY_S = 0.25, 4.0


class ObsError(Exception):
    """Something about OBS the user must fix, in one line. ``retryable``: the connection
    failed in a way that OBS coming back would cure (refused, reset, timed out)."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class ObsRequestError(ObsError):
    """OBS answered a request with an error status ``code``."""

    def __init__(self, request: str, code: int, comment: str) -> None:
        super().__init__(f"OBS could not do {request}: {comment or f'status {code}'}")
        self.request = request
        self.code = code


class PasswordError(ObsError):
    """OBS asks for a password and none was given (``missing``), or refused the one given.
    Where to give it is the front end's: ``advice(how)`` is the message with its way
    (the command line's option, the window's field); the plain message names none."""

    def __init__(self, where: str, missing: bool) -> None:
        self.where, self.missing = where, missing
        super().__init__(self.advice("enter it beside Add to OBS in Lipsync Studio's settings "
                                     "(Outputs (OBS)) and press Add to OBS"))

    def advice(self, how: str) -> str:
        problem = "asks for a password" if self.missing else "refused the password"
        return f"OBS at {self.where} {problem}: {how}; {PASSWORD_HINT}"


class Lost(Exception):
    """The connection dropped during a request."""


def _obs_process_running() -> bool:
    """Whether an OBS Studio process runs on this machine (Linux: /proc; elsewhere unknown,
    taken as False)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return False
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "obs":
                    return True
            except OSError:
                continue
    return False


def _is_local(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1", socket.gethostname())


class ObsConnection:
    """A connection to obs-websocket at ``host``:``port``, opened at the first request.

    ``reconnect_within_s`` bounds how long an operation waits for OBS to come back after
    it dropped the connection; ``timeout`` bounds each connection attempt and request.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 4455, password: str | None = None, *,
                 timeout: float = 5.0, reconnect_within_s: float = 20.0) -> None:
        self.host, self.port, self.password = host, port, password
        self.timeout = timeout
        self.reconnect_within_s = reconnect_within_s
        self.version: dict = {}
        self._client: obsws_python.ReqClient | None = None
        self._lock = threading.Lock()
        # Told, besides the operation's own lines, when a connection that was open drops.
        self.on_lost: Callable[[], None] = lambda: None

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    # -- connection --

    def connect(self) -> str:
        """Connect now (if not connected); returns the line saying to what."""
        with self._lock:
            if self._client is None:
                self._open()
            return self.greeting()

    def close(self) -> None:
        with self._lock:
            self._drop()

    def greeting(self) -> str:
        return (f"connected to OBS {self.version.get('obsVersion', '?')} (obs-websocket "
                f"{self.version.get('obsWebSocketVersion', '?')}) at {self.where}")

    def _drop(self) -> None:
        if self._client is not None:
            try:
                self._client.disconnect()
            except (OSError, WebSocketException):
                pass
            self._client = None

    def _open(self) -> None:
        """Connect and identify, or raise ObsError saying which step failed and why."""
        where = self.where
        try:
            socket.create_connection((self.host, self.port), self.timeout).close()
        except socket.gaierror:
            raise ObsError(f"cannot find the host {self.host!r} (check the OBS websocket address: "
                           "Settings → Outputs (OBS), or obs setup --host)") from None
        except ConnectionRefusedError:
            raise ObsError(self._nothing_listening(), retryable=True) from None
        except TimeoutError:
            raise ObsError(f"no answer from {where} within {self.timeout:g} s (a wrong host, or a "
                           "firewall in the way)", retryable=True) from None
        except OSError as exc:
            raise ObsError(f"cannot reach {where}: {exc.strerror or exc}", retryable=True) from None
        too_old = (f"{where} took the connection but did not greet as obs-websocket 5 does: an OBS "
                   "older than 28 (obs-websocket 4)? Update OBS to 28 or newer, which has "
                   "obs-websocket 5 built in")
        try:
            client = obsws_python.ReqClient(host=self.host, port=self.port, password=self.password or "",
                                            timeout=self.timeout)
        except ConnectionRefusedError:
            raise ObsError(self._nothing_listening(), retryable=True) from None
        except (WebSocketTimeoutException, TimeoutError, ValueError, KeyError, TypeError):
            # No Hello within the timeout (obs-websocket 4 waits for the client to speak
            # first), or a first message that is not a v5 Hello.
            raise ObsError(too_old) from None
        except WebSocketBadStatusException as exc:
            raise ObsError(f"{where} is not obs-websocket (it answered the WebSocket handshake with "
                           f"HTTP {exc.status_code}); check the port") from None
        except OBSSDKError as exc:
            # Identification refused after a Hello that asked for authentication: OBS
            # closes with 4009 (authentication failed), which obsws-python reports so.
            raise PasswordError(where, missing="no password provided" in str(exc)) from None
        except (WebSocketException, OSError) as exc:
            raise ObsError(f"the connection to OBS at {where} failed: {exc}", retryable=True) from None
        self._client = client
        try:
            self.version = self.call("GetVersion")
        except Lost:
            self._client = None
            raise ObsError(f"OBS at {where} closed the connection right after it opened",
                           retryable=True) from None
        major = str(self.version.get("obsWebSocketVersion", "0")).split(".")[0]
        if not major.isdigit() or int(major) < 5:
            self._drop()
            raise ObsError(f"obs-websocket {self.version.get('obsWebSocketVersion')} at {where} is too old: "
                           "update OBS to 28 or newer (obs-websocket 5)")

    def _nothing_listening(self) -> str:
        if _is_local(self.host) and _obs_process_running():
            return (f"OBS is running but nothing answers at {self.where}: its WebSocket server is off or "
                    f"on another port; enable it in the {ENABLE_HINT} (and check the port there)")
        if _is_local(self.host):
            return (f"OBS is not running (nothing answers at {self.where}): start OBS Studio with its "
                    f"WebSocket server on ({ENABLE_HINT}), then try again")
        return (f"nothing answers at {self.where}: OBS is not running there, or its WebSocket server is "
                f"off ({ENABLE_HINT})")

    def call(self, request: str, data: dict | None = None) -> dict:
        """One request; its response data ({} when none). ObsRequestError for an error status,
        Lost when the connection dropped."""
        if self._client is None:
            self._open()
        try:
            return self._client.send(request, data, raw=True) or {}
        except OBSSDKRequestError as exc:
            comment = str(exc).partition("With message: ")[2]
            raise ObsRequestError(request, exc.code, comment) from None
        except (OBSSDKError, WebSocketException, OSError, ValueError) as exc:
            # A closed socket, a reset, a request timeout, or the empty frame
            # websocket-client returns for a close (json cannot parse it).
            self._drop()
            raise Lost(str(exc)) from None

    def run(self, operation: Callable[[], None], say: Callable[[str], None]) -> None:
        """Run ``operation``; when the connection drops, reconnect with backoff (first retry
        after FIRST_RETRY_S, doubling up to MAX_RETRY_S, for at most reconnect_within_s in
        all) and run it again from the start."""
        with self._lock:
            deadline = None
            while True:
                try:
                    operation()
                    return
                except Lost:
                    if deadline is None:
                        self.on_lost()
                        deadline = time.monotonic() + self.reconnect_within_s
                        lost_at = time.monotonic()
                        say(f"lost the connection to OBS at {self.where}; reconnecting "
                            f"(for up to {self.reconnect_within_s:g} s)")
                    self._reconnect(deadline)
                    say(f"reconnected after {time.monotonic() - lost_at:.1f} s; starting over")

    def _reconnect(self, deadline: float) -> None:
        delay = FIRST_RETRY_S
        while True:
            try:
                self._open()
                return
            except ObsError as exc:
                left = deadline - time.monotonic()
                if not exc.retryable:
                    raise
                if left <= 0:
                    raise ObsError(f"OBS closed the connection at {self.where} (did it quit?) and did not "
                                   f"come back within {self.reconnect_within_s:g} s") from None
                time.sleep(min(delay, left))
                delay = min(delay * 2, MAX_RETRY_S)
