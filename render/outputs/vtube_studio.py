"""Our lip sync on a VTube Studio model: a plugin of VTube Studio's public API (a
WebSocket on ws://HOST:8001; github.com/DenchiSoft/VTubeStudio, README.md) injecting the
mouth at the frame rate.

    VTubeStudioOutput(host, port, fps=60.0, offset_s=0.0, token=None, on_token=None,
                      retry_s=(1.0, 5.0))

`offset_s` is how late VTube Studio shows a value it got (its render and smoothing,
which we cannot measure: the user's setting); frames are made for what is heard then.
`token` is the authentication token VTube Studio gave us before (None: none yet);
`on_token(token)` is called, on this output's thread, with each new one so the app can
keep it (a failure there only costs asking again at the next start). `retry_s` bounds
the reconnection backoff. The constructor never raises for VTube Studio: absent,
refusing or asking the user, it says so in `status()` and keeps trying by itself; only
an address that is no host name or IP address is an OutputError.

What is sent, per frame (pipeline.core.mouth_shapes, one InjectParameterDataRequest,
mode "set", faceFound false so VTube Studio's own tracking decides when the face is
lost): the default input parameters MouthOpen (0 shut .. 1 open, as VTube Studio's face
tracking gives it, the manual says) and MouthSmile (0..1; our form −1 round .. 1 wide
mapped linearly, so our neutral 0 is 0.5, the middle of the range a model maps onto
ParamMouthForm's −1..1; the range is what plugins' tables give, the manual states
none), and five custom parameters we create, LipsyncStudioA/I/U/E/O (0..1), which a model maps to
its vowel blend shapes (ParamA…ParamO) as it would VTube Studio's own VoiceA…VoiceO.
Only the mouth: VTube Studio blinks and breathes the model itself.

The flow: connect → (no token) AuthenticationTokenRequest, which VTube Studio answers
when the user clicks Allow or Deny in its window; the token goes to `on_token` →
AuthenticationRequest → ParameterCreationRequest for the five vowels (creating one that
exists already is allowed and keeps it) → inject at the frame rate. A token VTube Studio
refuses (revoked by the user: `authenticated` false, or errorID 50 on a later request)
is forgotten and a new one asked for. A denial is final for that VTube Studio session:
we ask again only on a new connection (VTube Studio restarted) or a new output.

Threads and hand-offs (the ticker never waits on the network):

- `vtube-studio-ticker` (render/timing/pose_ticker.py): a presenter on deadlines at
  `fps`, handing each frame to `_offer`, which computes the seven values and drops them
  into a one-slot mailbox (newest wins; replaced before sent while injecting: counted
  as dropped) under a lock held for a few assignments, then wakes the loop through
  call_soon_threadsafe (a byte to the loop's self-pipe, which does not block).
- `vtube-studio` (asyncio loop): the `websockets` client. It sends what the mailbox
  holds each time it is woken, so one request a tick, changed or not: VTube Studio lets
  a parameter go back to face tracking when it is not re-sent within a second, and a
  still mouth is still ours. Answers are read by a task of their own; at most
  MAX_IN_FLIGHT requests are unanswered at once, so a VTube Studio that stalls (loading
  a model) is not handed a backlog of stale mouths to work through.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.uri import parse_uri

from pipeline.core.mouth_shapes import VOWELS, mouth_shape
from render.outputs.contract import OutputError, OutputStatus
from render.timing.frame_producer import MediaClock, PoseSource
from render.timing.pose_ticker import PoseTicker
from render.timing.presenter import AvatarFrame

log = logging.getLogger(__name__)

API_NAME = "VTubeStudioPublicAPI"
API_VERSION = "1.0"
# Shown in VTube Studio's prompt and plugin list; both must be 3 to 32 characters, and
# the same in every AuthenticationRequest as in the token request.
PLUGIN_NAME = "Lipsync Studio"
PLUGIN_DEVELOPER = "Lipsync Studio developers"

MOUTH_OPEN = "MouthOpen"
MOUTH_SMILE = "MouthSmile"
# Ours: 4 to 32 letters or digits, not one of VTube Studio's own (VoiceA… are).
VOWEL_PARAMETERS = tuple(f"LipsyncStudio{v}" for v in VOWELS)
PARAMETERS = (MOUTH_OPEN, MOUTH_SMILE, *VOWEL_PARAMETERS)

# VTube Studio's errorIDs (Files/ErrorID.cs) that we answer to.
API_ACCESS_DEACTIVATED = 1
REQUIRES_AUTHENTICATION = 8
TOKEN_REQUEST_DENIED = 50          # the user denied us, or revoked our access since
TOKEN_REQUEST_ONGOING = 51         # a plugin prompt is open in VTube Studio already
PARAMETER_NOT_FOUND = 453
PARAMETER_CONTROLLED_BY_OTHER_PLUGIN = 454

# Unanswered injections at once. VTube Studio applies parameters at its own frames, so
# an answer may take one of its frames (16 ms at 60 fps; an assumption, there is no VTube
# Studio here to measure): 4 is room for that and a frame or two of jitter.
MAX_IN_FLIGHT = 4
# Answers to the handshake's requests; the token request waits for the user instead.
REQUEST_TIMEOUT_S = 5.0
OPEN_TIMEOUT_S = 3.0
# A VTube Studio that answers no WebSocket ping for PING_S (frozen, or its machine gone)
# is left after at most 2 × PING_S and connected to again.
PING_S = 5.0
CLOSE_TIMEOUT_S = 1.0
# While a plugin prompt of another plugin is open, how often we ask to show ours.
PROMPT_RETRY_S = 2.0
# A parameter another plugin controls is left out of our requests and tried again this
# often: only one plugin sets a parameter at a time, and the other may stop.
CONTESTED_RETRY_S = 2.0
# Sends kept for the lateness figures (P50 / P99): 4 s at 60 fps.
LATE_WINDOW = 256
_INJECT_PREFIX = "inject-"

ON, WAITING, TROUBLE = "on", "waiting", "trouble"


class VtsApiError(RuntimeError):
    """An APIError answer: VTube Studio's errorID and its message."""

    def __init__(self, error_id: int | None, message: str, request: str) -> None:
        super().__init__(f"{request}: {message} (error {error_id})")
        self.error_id = error_id
        self.message = message
        self.request = request


class _Unanswered(RuntimeError):
    """VTube Studio did not answer a request in time."""


def _named(text: str, names) -> list[str]:
    """Which of `names` an error message names. VTube Studio's do: "Parameter ParamPout
    not found. Did you create it yet? …" for errorID 453 (quoted in FomTarro/VTS-Sharp
    issue 51); the documentation gives no wording for 454, so a message naming none of
    ours is reported without a name."""
    return [n for n in names if re.search(rf"\b{re.escape(n)}\b", text)]


class VTubeStudioOutput:
    """The output contract (render/outputs/contract.py) for VTube Studio; running from
    construction to close().

    Invariants: the ticker's sink never blocks (a lock held for assignments, a
    non-blocking wake); every request the loop sends carries the newest values offered;
    offered == sent + dropped + (values offered while not injecting, which are kept but
    not counted) + the one waiting in the mailbox; close() leaves no thread of ours.
    """

    name = "vtube_studio"

    def __init__(self, host: str = "127.0.0.1", port: int = 8001, *, fps: float = 60.0,
                 offset_s: float = 0.0, token: str | None = None,
                 on_token: Callable[[str], None] | None = None,
                 retry_s: tuple[float, float] = (1.0, 5.0)) -> None:
        self.host, self.port, self.fps, self.offset_s = host, port, fps, offset_s
        self._uri = f"ws://[{host}]:{port}" if ":" in host else f"ws://{host}:{port}"
        try:
            parse_uri(self._uri)
        except (InvalidURI, ValueError):
            raise OutputError(f"VTube Studio's address “{host}” is not a host name or IP "
                              "address: check it in Settings → VTube Studio") from None
        self._token = token
        self._on_token = on_token
        self._retry_min, self._retry_max = retry_s
        self._target = f"VTube Studio at {host}:{port}"
        # The mailbox, between the ticker's thread and the loop.
        self._lock = threading.Lock()
        self._mail: tuple[tuple[float, ...], float] | None = None
        self._injecting = False
        self.offered = self.sent = self.dropped = 0
        # The loop's own (read elsewhere only as counters and the status tuple).
        self.acked = self.errors = self.connections = self.token_requests = 0
        self._late: deque[float] = deque(maxlen=LATE_WINDOW)
        self._pending: dict[str, asyncio.Future] = {}
        self._in_flight: dict[str, tuple[str, ...]] = {}
        self._requests = 0
        self._redo: str | None = None
        self._revoked = False
        self._problems: dict[str, str] = {}
        self._contested: dict[str, float] = {}  # name → when to try it again
        self._status = (WAITING, f"Connecting to {self._target}", None)
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vtube-studio", daemon=True)
        self._thread.start()
        self._ready.wait()
        self.ticker = PoseTicker(fps, latency_s=offset_s, name="vtube-studio-ticker")
        self.ticker.sinks.append(self._offer)
        self.ticker.start()

    # -- the contract ---------------------------------------------------------------

    def set_sources(self, pose_source: PoseSource | None, media_time_at: MediaClock | None,
                    source_version: Callable[[], int] | None = None) -> None:
        self.ticker.set_sources(pose_source, media_time_at, source_version)

    def set_rig(self, rig) -> None:
        """A pose output draws no rig: VTube Studio has its own model."""

    def set_idle_motion(self, blinking: bool = True, breathing: bool = True) -> None:
        """Nothing to do: only the mouth is sent, VTube Studio blinks and breathes the
        model itself."""

    def set_avatar_motion(self, motion) -> None:
        """Nothing to do: VTube Studio moves and poses its model itself (its own
        hotkeys set expressions); only the mouth is sent."""

    def status(self) -> OutputStatus:
        state, detail, problem = self._status
        late = sorted(self._late)
        figures = {
            "offered": self.offered, "sent": self.sent, "dropped": self.dropped,
            "acked": self.acked, "errors": self.errors, "in_flight": len(self._in_flight),
            "connections": self.connections, "token_requests": self.token_requests,
            # Sent + offset − the instant the frame was made for: how much later than
            # planned VTube Studio gets each frame, on our side (its own delay is the
            # offset).
            "late_ms_p50": late[len(late) // 2] * 1e3 if late else None,
            "late_ms_p99": late[(99 * len(late)) // 100] * 1e3 if late else None,
            "fps": self.ticker.presenter.measured_fps(),
        }
        return OutputStatus(self.name, state, detail, problem, figures)

    def close(self) -> None:
        """Stop the ticker, then the loop (closing the socket, at most CLOSE_TIMEOUT_S
        for VTube Studio's side of the close); safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.ticker.stop()
        self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join()

    # -- the ticker's side ------------------------------------------------------------

    def _offer(self, frame: AvatarFrame) -> None:
        shape = mouth_shape(frame.pose)
        values = (shape.open, 0.5 * (shape.form + 1.0), *shape.vowels)
        with self._lock:
            injecting = self._injecting
            if injecting and self._mail is not None:
                self.dropped += 1
            self._mail = (values, frame.predicted)
            self.offered += 1
        if injecting:
            with suppress(RuntimeError):  # the loop closed between the check and the call
                self._loop.call_soon_threadsafe(self._wake.set)

    def _take(self) -> tuple[tuple[float, ...], float] | None:
        with self._lock:
            mail, self._mail = self._mail, None
        return mail

    # -- status -----------------------------------------------------------------------

    def _set(self, state: str, detail: str, problem: str | None = None) -> None:
        self._status = (state, detail, problem)

    def _publish_on(self) -> None:
        """Injecting: on, or in trouble while some parameter is not ours."""
        detail = (f"Sending the mouth to {self._target} at {self.fps:g} fps: {MOUTH_OPEN}, "
                  f"{MOUTH_SMILE}, {VOWEL_PARAMETERS[0]}…{VOWELS[-1]}")
        problem = " ".join(self._problems.values()) or None
        self._set(TROUBLE if problem else ON, detail, problem)

    def _explain(self, error: VtsApiError) -> str:
        if error.error_id is None:
            return (f"VTube Studio's answer to {error.request} is not as its API documents "
                    f"({error.message}); connecting again")
        if error.error_id == API_ACCESS_DEACTIVATED:
            return ("VTube Studio's plugin API is off: turn it on in VTube Studio "
                    "(Settings → Start API)")
        return f"VTube Studio refused {error.request}: {error.message} (error {error.error_id})"

    # -- the loop ---------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._ready.set()
        connecting = asyncio.create_task(self._connect_forever())
        await self._stopping.wait()
        connecting.cancel()
        with suppress(asyncio.CancelledError):
            await connecting

    async def _connect_forever(self) -> None:
        """Connect, run a session, and connect again after a backoff doubling from
        retry_s[0] to retry_s[1] (back to the start after every connection made)."""
        delay = self._retry_min
        absent = (f"VTube Studio is not running at {self.host}:{self.port}, or its plugin "
                  "API is off (in VTube Studio: Settings → Start API); trying again")
        while True:
            try:
                async with connect(self._uri, open_timeout=OPEN_TIMEOUT_S,
                                   ping_interval=PING_S, ping_timeout=PING_S,
                                   close_timeout=CLOSE_TIMEOUT_S, compression=None,
                                   proxy=None) as ws:
                    delay = self._retry_min
                    self.connections += 1
                    await self._session(ws)
            except socket.gaierror:
                self._set(TROUBLE, f"Not connected to {self._target}",
                          f"This computer finds no “{self.host}”: check VTube Studio's "
                          "address in Settings → VTube Studio")
            except OSError:  # refused, unreachable, or no answer within OPEN_TIMEOUT_S
                self._set(WAITING, absent)
            except ConnectionClosed:
                self._set(WAITING, "VTube Studio closed the connection; connecting again")
            except InvalidHandshake as exc:
                self._set(TROUBLE, f"Not connected to {self._target}",
                          f"What answers at {self.host}:{self.port} is not VTube Studio's "
                          f"plugin API ({exc}): set Settings → VTube Studio to the port "
                          "VTube Studio's own settings show for its API")
            except _Unanswered as exc:
                self._set(TROUBLE, f"Not connected to {self._target}", str(exc))
            except VtsApiError as exc:
                self._set(TROUBLE, f"Not connected to {self._target}", self._explain(exc))
            except Exception as exc:  # a fault of ours: said, logged, and tried again
                log.exception("the VTube Studio session failed")
                self._set(TROUBLE, f"Not connected to {self._target}",
                          f"The link to VTube Studio failed ({exc}); connecting again")
            await asyncio.sleep(delay)
            delay = min(2 * delay, self._retry_max)

    async def _session(self, ws: ClientConnection) -> None:
        """One connection: the handshake and injecting, beside a reader of answers;
        whichever ends first (the connection closing, an error) ends both."""
        self._pending.clear()
        self._in_flight.clear()
        reader = asyncio.create_task(self._read(ws))
        work = asyncio.create_task(self._work(ws))
        try:
            done, _ = await asyncio.wait({reader, work}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            reader.cancel()
            work.cancel()
            await asyncio.gather(reader, work, return_exceptions=True)
        for task in done:
            task.result()

    async def _read(self, ws: ClientConnection) -> None:
        while True:
            text = await ws.recv()  # ConnectionClosed ends the session
            try:
                message = json.loads(text)
                request_id = message.get("requestID")
            except (ValueError, AttributeError):
                log.warning("VTube Studio sent what is not a JSON object: %.200r", text)
                continue
            future = self._pending.pop(request_id, None)
            if future is not None:
                if not future.done():
                    future.set_result(message)
            elif isinstance(request_id, str) and request_id.startswith(_INJECT_PREFIX):
                self._answered(request_id, message)
            # Anything else (events) is not ours.

    async def _request(self, ws: ClientConnection, message_type: str, data: dict,
                       timeout: float | None = REQUEST_TIMEOUT_S) -> dict:
        """Send one request and wait for its answer's data; VtsApiError for an APIError."""
        self._requests += 1
        request_id = f"{message_type.removesuffix('Request')}-{self._requests}"
        future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await ws.send(json.dumps({"apiName": API_NAME, "apiVersion": API_VERSION,
                                      "requestID": request_id, "messageType": message_type,
                                      "data": data}))
            message = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise _Unanswered(f"VTube Studio did not answer {message_type} within "
                              f"{timeout:g} s; connecting again") from None
        finally:
            self._pending.pop(request_id, None)
        answer = message.get("data") or {}
        if message.get("messageType") == "APIError":
            raise VtsApiError(answer.get("errorID"), str(answer.get("message", "")),
                              message_type)
        return answer

    async def _work(self, ws: ClientConnection) -> None:
        await self._authenticate(ws)
        while True:
            vowels = await self._create_parameters(ws)
            if await self._inject(ws, vowels) == "authenticate":
                await self._authenticate(ws)

    async def _authenticate(self, ws: ClientConnection) -> None:
        while True:
            if self._token is None:
                await self._ask_for_token(ws)
            data = await self._request(ws, "AuthenticationRequest", {
                "pluginName": PLUGIN_NAME, "pluginDeveloper": PLUGIN_DEVELOPER,
                "authenticationToken": self._token})
            if data.get("authenticated") is True:
                self._revoked = False
                return
            # Revoked in VTube Studio, or a token of another VTube Studio: ask anew.
            self._token = None
            self._revoked = True

    async def _ask_for_token(self, ws: ClientConnection) -> None:
        asking = (f"Allow {PLUGIN_NAME} in VTube Studio: click Allow in its plugin prompt"
                  if not self._revoked else
                  f"VTube Studio no longer allows {PLUGIN_NAME} (its access was revoked): "
                  "click Allow in VTube Studio's plugin prompt to give it back")
        while True:
            self._set(WAITING, asking)
            self.token_requests += 1
            try:
                data = await self._request(ws, "AuthenticationTokenRequest", {
                    "pluginName": PLUGIN_NAME, "pluginDeveloper": PLUGIN_DEVELOPER},
                    timeout=None)  # as long as the user takes
            except VtsApiError as exc:
                if exc.error_id == TOKEN_REQUEST_DENIED:
                    self._set(TROUBLE, f"Not sending to {self._target}",
                              f"You denied {PLUGIN_NAME} in VTube Studio. It asks again when "
                              "VTube Studio restarts; or switch VTube Studio off and on in "
                              f"{PLUGIN_NAME}'s settings, then click Allow in VTube Studio")
                    await asyncio.Future()  # until this connection ends, or close()
                if exc.error_id == TOKEN_REQUEST_ONGOING:
                    self._set(WAITING, "VTube Studio is showing another plugin's prompt: "
                              f"answer it, then VTube Studio asks about {PLUGIN_NAME}")
                    await asyncio.sleep(PROMPT_RETRY_S)
                    continue
                raise
            token = data.get("authenticationToken")
            if not isinstance(token, str) or not token:
                raise VtsApiError(None, "no authenticationToken in it",
                                  "AuthenticationTokenRequest")
            self._token = token
            if self._on_token is not None:
                try:
                    self._on_token(token)
                except Exception:  # keeping it is the app's; we have it for this run
                    log.exception("could not hand over VTube Studio's token")
            return

    async def _create_parameters(self, ws: ClientConnection) -> tuple[str, ...]:
        """Create the vowel parameters (again: that keeps them); the names created. One
        VTube Studio refuses is reported and left out."""
        created = []
        refused = []
        for name, vowel in zip(VOWEL_PARAMETERS, VOWELS):
            try:
                await self._request(ws, "ParameterCreationRequest", {
                    "parameterName": name,
                    "explanation": f"{PLUGIN_NAME}'s lip sync: how much the mouth shows the "
                                   f"vowel {vowel}, 0..1. Map it to the model's Param{vowel}, "
                                   f"as you would VTube Studio's Voice{vowel}.",
                    "min": 0.0, "max": 1.0, "defaultValue": 0.0})
                created.append(name)
            except VtsApiError as exc:
                if exc.error_id in (TOKEN_REQUEST_DENIED, REQUIRES_AUTHENTICATION):
                    raise
                refused.append(f"{name}: {exc.message} (error {exc.error_id})")
        if refused:
            self._problems["parameters"] = ("VTube Studio refused to create "
                                            + "; ".join(refused) + ".")
        else:
            self._problems.pop("parameters", None)
        return tuple(created)

    async def _inject(self, ws: ClientConnection, vowels: tuple[str, ...]) -> str:
        """Send the mailbox's values at each wake until an answer says to authenticate
        ("authenticate") or create the parameters ("parameters") again."""
        names = (MOUTH_OPEN, MOUTH_SMILE, *vowels)
        index = {name: i for i, name in enumerate(PARAMETERS)}
        self._redo = None
        self._in_flight.clear()  # answers to requests of before are not counted
        # What VTube Studio refused before is found out anew.
        self._contested.clear()
        for key in ("contested", "refused"):
            self._problems.pop(key, None)
        self._publish_on()
        with self._lock:
            self._injecting = True
            self._mail = None  # made while not sending: its instant has passed
        full_since = None  # when MAX_IN_FLIGHT were last found unanswered, first
        try:
            while self._redo is None:
                self._wake.clear()
                mail = self._take()
                if mail is None:
                    await self._wake.wait()
                    continue
                now = time.monotonic()
                if len(self._in_flight) >= MAX_IN_FLIGHT:
                    with self._lock:
                        self.dropped += 1
                    full_since = now if full_since is None else full_since
                    if now - full_since > REQUEST_TIMEOUT_S:
                        raise _Unanswered("VTube Studio stopped answering the mouth's values "
                                          f"for {REQUEST_TIMEOUT_S:g} s; connecting again")
                    continue
                full_since = None
                values, predicted = mail
                sending = tuple(n for n in names if self._contested.get(n, 0.0) <= now)
                for name in sending:
                    if name in self._contested:
                        self._contested[name] = now + CONTESTED_RETRY_S
                self._requests += 1
                request_id = f"{_INJECT_PREFIX}{self._requests}"
                self._in_flight[request_id] = sending
                await ws.send(json.dumps({
                    "apiName": API_NAME, "apiVersion": API_VERSION, "requestID": request_id,
                    "messageType": "InjectParameterDataRequest",
                    "data": {"faceFound": False, "mode": "set", "parameterValues": [
                        {"id": name, "value": values[index[name]]} for name in sending]}}))
                sent = time.monotonic()
                with self._lock:
                    self.sent += 1
                self._late.append(sent + self.offset_s - predicted)
            return self._redo
        finally:
            with self._lock:
                self._injecting = False

    def _answered(self, request_id: str, message: dict) -> None:
        """An answer to an injection (on the loop, from the reader)."""
        names = self._in_flight.pop(request_id, None)
        if names is None:
            return  # of a request made before authenticating or creating again
        if message.get("messageType") != "APIError":
            self.acked += 1
            back = [n for n in names if n in self._contested]
            for name in back:
                del self._contested[name]
            cleared = self._problems.pop("refused", None) is not None
            if back and not self._contested:
                cleared |= self._problems.pop("contested", None) is not None
            if cleared:
                self._publish_on()
            return
        self.errors += 1
        data = message.get("data") or {}
        error_id, text = data.get("errorID"), str(data.get("message", ""))
        if error_id in (TOKEN_REQUEST_DENIED, REQUIRES_AUTHENTICATION):
            if error_id == TOKEN_REQUEST_DENIED:  # the user revoked our access
                self._token = None
                self._revoked = True
            self._redo = "authenticate"
        elif error_id == PARAMETER_NOT_FOUND and _named(text, VOWEL_PARAMETERS):
            self._redo = "parameters"  # a vowel deleted in VTube Studio: create it again
        elif error_id == PARAMETER_CONTROLLED_BY_OTHER_PLUGIN:
            taken = _named(text, names)
            retry = time.monotonic() + CONTESTED_RETRY_S
            for name in taken:
                self._contested[name] = retry
            which = ", ".join(sorted(self._contested)) or "one of the mouth parameters"
            self._problems["contested"] = (
                f"Another plugin is controlling {which} in VTube Studio, so {PLUGIN_NAME} "
                f"cannot move it (only one plugin sets a parameter at a time): stop that "
                f"plugin's control of {which}. The other mouth parameters still follow "
                "our lip sync.")
            self._publish_on()
        else:
            self._problems["refused"] = (f"VTube Studio refused the mouth values: {text} "
                                         f"(error {error_id})")
            self._publish_on()
        self._wake.set()
