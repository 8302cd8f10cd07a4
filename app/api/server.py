"""The API server: HTTP and WebSocket on one port (aiohttp, on a loop of its own thread:
pipeline/core/server_thread.py), off unless the settings or --api-port turn it on.

Routes (each also under /v1; docs/api.md has every message and its JSON Schema):

==========================  ==========================================================
``GET /stream`` (WebSocket)  speech with its timing: audio chunks, cues, switch_mode,
                             text in pieces (speech.py)
``POST /warmup``             answers once every shape of the voice is warm
``POST /v1/audio/speech``    OpenAI's speech request, streamed as it is made
``GET /control`` (WebSocket) control of the app and its events (control.py)
``POST /speak``, ``/stop``   the same for tools that only do HTTP; ``GET /status``
==========================  ==========================================================

Guards, in order, for every request: its Origin (a browser page of another site is
refused unless its origin is in api_allowed_origins; tools send no Origin), its token
(``Authorization: Bearer T`` or ``?token=T``; only /control may connect without one, to
ask for a token), then the limits: message size, messages per second (per connection,
and per token over HTTP), concurrent streams. Every refusal is a reply saying which.

Tokens (tokens.py) are read from the config folder and the file is watched, so a token
revoked at a terminal closes its connections within TOKEN_WATCH_S.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from app.api import control, speech
from app.api.channel import TOKEN_NAME, RateLimit
from app.api.protocol import ApiFault, dumps
from app.api.tokens import TOKENS_FILE, TokenStore
from app.messages import EVENT_SECONDS, Severity
from app.settings import Settings, config_dir
from pipeline.core.server_thread import ServerError, ServerThread, listen_error
from pipeline.core.started_threads import StartedThreads
from pipeline.voice.streaming_tts import StreamingTTS

log = logging.getLogger(__name__)

# How often the token file is looked at for a revoke made elsewhere.
TOKEN_WATCH_S = 0.5
# What messages about a client sending past its rate are about (app/messages.py).
FLOOD = "api flood"
# A request for a token waits this long for the user's answer.
APPROVAL_TIMEOUT_S = 120.0
# Calls into the studio (its GUI thread) are answered within this, or time out.
STUDIO_CALL_TIMEOUT_S = 10.0
# WebSocket messages over this many times the message limit (or 4 MiB) are not even read:
# aiohttp closes that connection (1009). Below it, a message over the limit is read and
# refused with a reply, the connection kept.
HARD_CAP_FACTOR, HARD_CAP_MIN = 4, 4 * 2**20
# aiohttp's limit on a request line (8,190 bytes) refused a /stream?text=... of 3 KB of
# percent-encoded text, with a traceback in the log: the line may hold a message of
# api_max_message_bytes, each byte percent-encoded (3 bytes), besides the rest of it.
URL_ENCODING_FACTOR, REQUEST_LINE_REST = 3, 8190


class _OneLineBadRequests(logging.Filter):
    """aiohttp logs every request it cannot read as HTTP (a line over the limit, bytes
    that are not HTTP) with a traceback, after answering 400: one line says it."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.msg, record.args = "API: refused a request it cannot read: %s %s", (
                exc.code, str(exc.message)[:200])
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_ONE_LINE_BAD_REQUESTS = _OneLineBadRequests()


class ApiError(RuntimeError):
    """The API cannot serve; one line for the user."""


@dataclass(frozen=True, slots=True)
class ApiConfig:
    host: str
    port: int
    allow_network: bool
    allowed_origins: tuple[str, ...]
    max_message_bytes: int
    messages_per_second: int
    max_streams: int

    @classmethod
    def from_settings(cls, settings: Settings, port: int | None = None) -> ApiConfig:
        origins = tuple(o.rstrip("/") for o in re.split(r"[\s,]+", settings.api_allowed_origins or "")
                        if o)
        return cls(settings.api_bind_address, port if port is not None else settings.api_port,
                   settings.api_allow_network, origins, settings.api_max_message_bytes,
                   settings.api_messages_per_second, settings.api_max_streams)

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.host).is_loopback

    def check(self) -> None:
        """ApiError unless the address may be listened on: a loopback one, or any with
        the second, explicit choice (api_allow_network)."""
        if not self.loopback and not self.allow_network:
            raise ApiError(
                f"api_bind_address {self.host} is not on this computer only: other computers "
                "could reach the API there. Turn on 'Let other computers reach the API' "
                "(api_allow_network) to listen there, or use 127.0.0.1.")

    def warning(self) -> str | None:
        if self.loopback:
            return None
        return (f"listening on {self.host}: other computers on your network can reach the "
                "API (each still needs a token)")


class ApiServer:
    """The server of one Studio (app/studio.py). start() binds (ApiError: why not);
    close() closes every connection and the port."""

    def __init__(self, studio, config: ApiConfig) -> None:
        self.studio = studio
        self.config = config
        self.tokens = TokenStore(config_dir() / TOKENS_FILE)
        self._thread = ServerThread("api-server")
        self._runner: web.AppRunner | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        # Open WebSockets by the token name they came with (None: not signed in yet).
        self.sockets: dict[web.WebSocketResponse, str | None] = {}
        self.streams = 0  # /stream and /v1/audio/speech under way
        self._http_limits: dict[str, RateLimit] = {}
        # Token requests waiting for the user: name → future of the decision.
        self.pending: dict[str, asyncio.Future] = {}
        # Times each stream's written words beside its synthesis (speech_stream.py); one
        # thread, so each stream's plans are timed in their order.
        self.cues_worker: StartedThreads | None = None
        # A thread for each stream the settings allow at once, started with the server:
        # one started per stream held the loop (pipeline/core/started_threads.py).
        self.stream_workers: StartedThreads | None = None
        # The voice each API stream's own is made from (speech._voice_factory), by
        # provider and batch sizes; used on the loop only.
        self.stream_voices: dict[tuple[str, tuple[int, ...]], StreamingTTS] = {}
        self._origins = {f"http://{host}:{config.port}" for host in
                         ("127.0.0.1", "localhost", "[::1]", config.host)}
        self._origins.update(config.allowed_origins)

    @property
    def url(self) -> str:
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        return f"http://{host}:{self.config.port}/"

    def start(self) -> None:
        self.config.check()
        if self.tokens.problem:
            log.warning("%s", self.tokens.problem)
        self.cues_worker = StartedThreads(1, "api-cues")
        self.stream_workers = StartedThreads(self.config.max_streams, "api-stream")
        try:
            self._thread.start(self._serve)
        except ServerError as exc:
            self._close_workers()
            raise ApiError(str(exc)) from None

    def close(self) -> None:
        self._thread.stop()
        self._close_workers()

    def _close_workers(self) -> None:
        for workers in (self.cues_worker, self.stream_workers):
            if workers is not None:
                workers.close()

    # -- the loop -------------------------------------------------------------------

    async def _serve(self):
        app = web.Application(middlewares=[self._guard],
                              client_max_size=self.config.max_message_bytes)
        for prefix in ("", "/v1"):
            app.router.add_get(f"{prefix}/stream", self._with(speech.stream_socket))
            app.router.add_post(f"{prefix}/warmup", self._with(speech.warmup))
            app.router.add_get(f"{prefix}/control", self._with(control.control_socket))
            app.router.add_post(f"{prefix}/speak", self._with(control.speak_http))
            app.router.add_post(f"{prefix}/stop", self._with(control.stop_http))
            app.router.add_get(f"{prefix}/status", self._with(control.status_http))
        app.router.add_post("/v1/audio/speech", self._with(speech.openai_speech))
        logging.getLogger("aiohttp.server").addFilter(_ONE_LINE_BAD_REQUESTS)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     max_line_size=URL_ENCODING_FACTOR * self.config.max_message_bytes
                                     + REQUEST_LINE_REST,
                                     shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.host, self.config.port)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise ServerError(listen_error(exc, "The API", self.config.host, self.config.port,
                                           "Settings → Outputs/API, or --api-port")) from None
        self.loop = asyncio.get_running_loop()
        watch = asyncio.create_task(self._watch_tokens())

        async def shutdown() -> None:
            watch.cancel()
            for future in self.pending.values():
                if not future.done():
                    future.cancel()
            for ws in list(self.sockets):
                await ws.close(code=1001, message=b"the app is closing")
            await self._runner.cleanup()

        return shutdown

    def _with(self, handler):
        async def handle(request: web.Request):
            return await handler(self, request)
        return handle

    @web.middleware
    async def _guard(self, request: web.Request, handler):
        origin = request.headers.get("Origin")
        if origin is not None and origin.rstrip("/") not in self._origins:
            return self.fault_response(ApiFault(
                "forbidden_origin", f"pages from {origin} may not use the API: add that origin "
                "to 'Allowed page origins' (api_allowed_origins) in the settings to let them"))
        if request.method == "OPTIONS":  # a page's preflight before a POST with a token
            return self._cors(web.Response(status=204), origin)
        name = await self.token_name(token_of(request))
        request[TOKEN_NAME] = name
        socket = request.headers.get("Upgrade", "").lower() == "websocket"
        # /control admits a connection with no token at all: it may ask for one.
        asking = socket and request.path.endswith("/control") and token_of(request) is None
        if name is None and not asking:
            why = "no token" if token_of(request) is None else "a token this app does not know"
            return self._cors(self.fault_response(ApiFault(
                "unauthorized", f"the request has {why}: send 'Authorization: Bearer TOKEN' or "
                "?token=TOKEN (lipsync-studio api token create NAME makes one, or ask for one "
                'on /control with {"type": "request_token", "name": ...})')), origin)
        if not socket and name is not None:
            limit = self._http_limits.get(name)
            if limit is None:
                limit = self._http_limits[name] = self.rate_limit(lambda: name)
            if not limit.allow():
                return self._cors(self.fault_response(limit.fault()), origin)
        try:
            response = await handler(request)
        except web.HTTPRequestEntityTooLarge:
            response = self.fault_response(ApiFault(
                "too_large", f"the request body is over the limit of "
                f"{self.config.max_message_bytes} bytes (api_max_message_bytes)"))
        except (web.HTTPNotFound, web.HTTPMethodNotAllowed):  # the router's, in plain text
            response = self.fault_response(ApiFault(
                "not_found", f"there is no {request.method} {request.path}: docs/api.md "
                "lists the routes"))
        except web.HTTPBadRequest as exc:  # a plain GET of a WebSocket route
            response = self.fault_response(ApiFault(
                "bad_message", f"{request.path} takes a WebSocket connection ({exc.text})"))
        return self._cors(response, origin) if not socket else response

    @staticmethod
    def _cors(response: web.StreamResponse, origin: str | None) -> web.StreamResponse:
        if origin is not None and not response.prepared:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Headers"] = "Authorization, Content-Type"
            response.headers["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
            response.headers["Vary"] = "Origin"
        return response

    @staticmethod
    def fault_response(fault: ApiFault, extra: dict | None = None) -> web.Response:
        return web.Response(status=fault.status, text=dumps({**fault.reply(), **(extra or {})}),
                            content_type="application/json")

    @property
    def hard_cap(self) -> int:
        return max(HARD_CAP_MIN, HARD_CAP_FACTOR * self.config.max_message_bytes)

    # -- limits ---------------------------------------------------------------------

    def rate_limit(self, name: Callable[[], str | None]) -> RateLimit:
        """The message rate limit of a connection (or of a token over HTTP) whose client
        is `name()` (None: not signed in): a flood of it is told to the user."""
        return RateLimit(self.config.messages_per_second,
                         on_flood=lambda: self._flooded(name()))

    def _flooded(self, name: str | None) -> None:
        """Said once while shown, however long the flood and over however many of the
        client's connections: each refusal is already answered to the client itself."""
        who = f"The API client {name!r}" if name is not None else "An API client without a token"
        text = (f"{who} sends more than {self.config.messages_per_second} messages a second: "
                "the rest are refused and it is served at that rate; other clients are not "
                "held up (api_messages_per_second in the settings).")
        self.studio.call_soon(lambda: self.studio.tell(text, Severity.WARNING,
                                                       key=(FLOOD, name), seconds=EVENT_SECONDS))

    # -- tokens ---------------------------------------------------------------------

    async def token_name(self, token: str | None) -> str | None:
        """The name whose token `token` is, or None. A token made at a terminal a moment
        ago (`api token create`) is in the file before the watch reads it again (every
        TOKEN_WATCH_S): an unknown one has the file read now if it changed, rather than
        be refused; a stat per refusal, nothing on the known path."""
        name = self.tokens.check(token)
        if name is None and token and self.tokens.changed():
            await self.close_revoked()
            name = self.tokens.check(token)
        return name

    async def _watch_tokens(self) -> None:
        while True:
            await asyncio.sleep(TOKEN_WATCH_S)
            if self.tokens.changed():
                await self.close_revoked()

    async def close_revoked(self) -> None:
        """Close every connection whose token is no longer in the file."""
        known = {entry.name for entry in self.tokens.names()}
        for ws, name in list(self.sockets.items()):
            if name is not None and name not in known:
                try:
                    await ws.send_str(dumps(ApiFault("revoked", f"the token of {name!r} was "
                                                     "revoked: this connection closes").reply()))
                except (ConnectionError, RuntimeError):
                    pass
                await ws.close(code=4001, message=b"token revoked")

    async def request_token(self, name: str) -> str:
        """Ask the user (in the window, or on headless's console) to let `name` in; the
        new token, or ApiFault (denied, no answer in time, a request already waiting)."""
        if name in self.pending:
            raise ApiFault("busy", f"a token request for {name!r} is already waiting for the "
                           "user's answer")
        future = self.loop.create_future()
        self.pending[name] = future
        self.studio.call_soon(lambda: self.studio.ask_for_token(name))
        try:
            approved = await asyncio.wait_for(future, APPROVAL_TIMEOUT_S)
        except TimeoutError:
            raise ApiFault("approval_timeout", f"nobody answered the request for {name!r} within "
                           f"{APPROVAL_TIMEOUT_S:.0f} s in Lipsync Studio") from None
        finally:
            self.pending.pop(name, None)
        if not approved:
            raise ApiFault("denied", f"the user denied {name!r} a token in Lipsync Studio")
        self.tokens.revoke(name)  # approving again gives a new token for the name
        return self.tokens.create(name)

    def decide(self, name: str, approve: bool) -> bool:
        """The user's answer to `name`'s token request (from any thread). False when no
        such request waits."""
        if name not in self.pending:
            return False
        self._thread.call(self._decided, name, approve)
        return True

    def _decided(self, name: str, approve: bool) -> None:
        future = self.pending.get(name)
        if future is not None and not future.done():
            future.set_result(approve)

    # -- the studio -----------------------------------------------------------------

    async def on_studio(self, call: Callable[[], object]):
        """`call()` run on the studio's thread; its result, or what it raised."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle(setter, value) -> None:
            if not future.done():
                setter(value)

        def run() -> None:
            try:
                result = call()
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting request
                loop.call_soon_threadsafe(settle, future.set_exception, exc)
            else:
                loop.call_soon_threadsafe(settle, future.set_result, result)

        self.studio.call_soon(run)
        try:
            return await asyncio.wait_for(future, STUDIO_CALL_TIMEOUT_S)
        except TimeoutError:
            raise ApiFault("unavailable", "the app did not answer in time") from None

    async def voice(self):
        """The studio's loaded voice, waiting while it loads (ApiFault if it does not)."""
        deadline = time.monotonic() + speech.VOICE_WAIT_S
        while self.studio.tts is None:
            if time.monotonic() > deadline:
                raise ApiFault("voice_loading", "the voice is still loading; try again shortly")
            await asyncio.sleep(0.05)
        return self.studio.tts


def token_of(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return request.query.get("token") or None
