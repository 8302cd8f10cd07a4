"""VTube Studio's plugin API for tests: a real WebSocket server on 127.0.0.1.

VTube Studio has no Linux build, so this is written from its public API documentation
(github.com/DenchiSoft/VTubeStudio: README.md for the messages and their rules,
Files/ErrorID.cs for the errorIDs), for the part of it a lip sync plugin uses:

- the envelope: every request carries apiName "VTubeStudioPublicAPI" and apiVersion
  "1.0" (errors 3 / 4), an optional requestID of 1 to 64 ASCII characters (5; a UUID is
  made up when there is none) and a messageType (6 missing, 7 unknown); every answer
  carries apiName, apiVersion, a UNIX millisecond timestamp, messageType, requestID
  and a data object ({} when empty); errors are messageType "APIError" with data
  {errorID, message}; text that is not JSON is error 2;
- APIStateRequest; the plugin prompt: AuthenticationTokenRequest (pluginName and
  pluginDeveloper 3 to 32 characters: 52 / 53; pluginIcon base64: 54) is answered when
  the user decides (`user_allows`, or `answer()` for a user who takes their time), with a
  token or error 50; a second request while a prompt is open is error 51;
  AuthenticationRequest (100 / 101 / 102 for a missing field) answers `authenticated`
  true for a token given to that plugin name and developer, false otherwise; every
  other request needs an authenticated session (8), or gets 50 once the user revoked
  the plugin (`revoke()`, which also deletes its custom parameters, as VTube Studio
  does);
- ParameterCreationRequest (name 4-32 letters or digits: 350; min, max, defaultValue
  numbers within ±1000000: 351; a name another plugin created: 352; explanation under
  256 characters: 353; a default parameter's name: 354; 100 per plugin: 355, 300 in
  all: 356; creating one of one's own again succeeds and updates it),
  InputParameterListRequest;
- InjectParameterDataRequest: mode "set" (the default) or "add" (455), a non-empty
  parameterValues (450), each id known (453, naming it), its value a number within
  ±1000000 (451), its weight within 0..1 (452); in "set" mode a parameter another
  plugin set less than a second ago is that plugin's (454, naming it); "add" is checked
  and recorded, not applied (no test adds). A parameter not set again within a second
  goes back to what controlled it before: here, with no face tracking, its default value
  (`value()`, `controller()`).

Each injection is recorded (`injections`) with its arrival time (time.monotonic(), taken
as the message is read), its values and the errorID it got (None: applied). `pause()`
makes it a VTube Studio too busy to answer for a while (loading a model), `hold()`
another plugin setting a parameter, `delete_parameter()` and `revoke()` what the user
does in its settings. The
messages' wording is ours where the documentation gives none. Tokens and custom
parameters outlive stop() / start(), as VTube Studio keeps them in its config folder
across restarts; sessions and who controls what do not.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import math
import re
import time
import uuid
from dataclasses import dataclass, field

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from pipeline.core.server_thread import ServerThread

API_NAME = "VTubeStudioPublicAPI"
API_VERSION = "1.0"
VERSION = "1.9.0"  # the documentation's example APIStateResponse

# errorIDs, Files/ErrorID.cs
JSON_INVALID = 2
API_NAME_INVALID = 3
API_VERSION_INVALID = 4
REQUEST_ID_INVALID = 5
REQUEST_TYPE_MISSING = 6
REQUEST_TYPE_UNKNOWN = 7
REQUIRES_AUTHENTICATION = 8
TOKEN_REQUEST_DENIED = 50
TOKEN_REQUEST_ONGOING = 51
PLUGIN_NAME_INVALID = 52
DEVELOPER_NAME_INVALID = 53
PLUGIN_ICON_INVALID = 54
TOKEN_MISSING = 100
PLUGIN_NAME_MISSING = 101
PLUGIN_DEVELOPER_MISSING = 102
PARAM_NAME_INVALID = 350
PARAM_VALUES_INVALID = 351
PARAM_CREATED_BY_OTHER_PLUGIN = 352
PARAM_EXPLANATION_TOO_LONG = 353
PARAM_DEFAULT_NAME_NOT_ALLOWED = 354
PARAM_LIMIT_PER_PLUGIN = 355
PARAM_LIMIT_TOTAL = 356
INJECT_NO_DATA = 450
INJECT_VALUE_INVALID = 451
INJECT_WEIGHT_INVALID = 452
INJECT_PARAM_NOT_FOUND = 453
INJECT_PARAM_CONTROLLED_BY_OTHER_PLUGIN = 454
INJECT_MODE_UNKNOWN = 455

LOST_AFTER_S = 1.0
VALUE_LIMIT = 1_000_000.0
PER_PLUGIN_LIMIT, TOTAL_LIMIT = 100, 300

# Some of VTube Studio's own input parameters: (min, max, default). FaceAngleX and
# FacePositionX as the documentation's InputParameterListResponse lists them; MouthOpen
# 0..1 (the manual: "0 being closed and 1 being all the way open"); the lip sync's
# VoiceA…VoiceO and VoiceVolume 0..1 (the manual's Lipsync page); MouthSmile 0..1 as
# plugins' tables give it, its default the middle (assumed: the documentation gives
# none).
DEFAULT_PARAMETERS: dict[str, tuple[float, float, float]] = {
    "FacePositionX": (-10.0, 10.0, 0.0), "FaceAngleX": (-30.0, 30.0, 0.0),
    "MouthOpen": (0.0, 1.0, 0.0), "MouthSmile": (0.0, 1.0, 0.5),
    **{f"Voice{v}": (0.0, 1.0, 0.0) for v in "AIUEO"}, "VoiceVolume": (0.0, 1.0, 0.0),
}

_REPLIES = {"APIStateRequest", "AuthenticationTokenRequest", "AuthenticationRequest",
            "ParameterCreationRequest", "InputParameterListRequest",
            "InjectParameterDataRequest"}
_NO_AUTHENTICATION = {"APIStateRequest", "AuthenticationTokenRequest", "AuthenticationRequest"}
_NAME = re.compile(r"[A-Za-z0-9]{4,32}")


class ApiError(Exception):
    def __init__(self, error_id: int, message: str) -> None:
        super().__init__(message)
        self.error_id = error_id
        self.message = message


@dataclass(frozen=True, slots=True)
class Injection:
    arrived: float               # time.monotonic() when the message was read
    plugin: str | None
    values: dict[str, float]     # id → value as sent
    mode: str
    face_found: bool
    error_id: int | None         # None: applied


@dataclass(eq=False)  # one per connection, kept in a set
class _Session:
    ws: ServerConnection
    plugin: tuple[str, str] | None = None   # (pluginName, pluginDeveloper) once authenticated
    revoked: bool = False


@dataclass
class _Prompt:
    session: _Session
    plugin: tuple[str, str]
    decided: asyncio.Future = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())


def _number(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and abs(value) <= VALUE_LIMIT)


class VTubeStudioServer:
    """`user_allows`: how the user answers each plugin prompt (True Allow, False Deny,
    None: when the test calls answer()). Methods are called from the test's thread."""

    def __init__(self, *, user_allows: bool | None = True, port: int = 0) -> None:
        self.user_allows = user_allows
        self.port = port
        self.tokens: dict[str, tuple[str, str]] = {}
        # name → {"addedBy", "explanation", "min", "max", "defaultValue"}
        self.custom_parameters: dict[str, dict] = {}
        self.injections: list[Injection] = []
        self.token_requests = 0
        self._thread: ServerThread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sessions: set[_Session] = set()
        self._prompt: _Prompt | None = None
        self._waiting: set[asyncio.Task] = set()
        # id → (plugin, value, monotonic time set) for "set"; holds from hold() never lapse.
        self._control: dict[str, tuple[str, float, float]] = {}

    # -- the test's side ----------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Listen (again, on the same port after stop())."""
        self._thread = ServerThread("vtube-studio-harness")
        self._thread.start(self._serve)

    def stop(self) -> None:
        """VTube Studio quits: every plugin's connection closes (1001, going away)."""
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    def answer(self, allow: bool) -> None:
        """The user clicks Allow or Deny in the open plugin prompt."""
        self._on_loop(self._decide, allow)

    @property
    def prompt_open(self) -> bool:
        return self._prompt is not None

    def revoke(self, plugin_name: str) -> None:
        """The user revokes a plugin's access in VTube Studio's settings."""
        self._on_loop(self._revoke, plugin_name)

    def delete_parameter(self, name: str) -> None:
        """The user deletes a custom parameter in VTube Studio."""
        self._on_loop(self.custom_parameters.pop, name, None)

    def pause(self) -> None:
        """VTube Studio is busy (loading a model, say): requests wait, unanswered,
        until resume()."""
        self._on_loop(self._answering.clear)

    def resume(self) -> None:
        self._on_loop(self._answering.set)

    def hold(self, parameter: str, plugin: str = "Other Plugin") -> None:
        """Another plugin sets `parameter` and keeps setting it until release()."""
        self._on_loop(self._control.__setitem__, parameter, (plugin, 0.0, math.inf))

    def release(self, parameter: str) -> None:
        self._on_loop(self._control.pop, parameter, None)

    def controller(self, parameter: str, at: float | None = None) -> str | None:
        """The plugin controlling `parameter` at monotonic time `at` (now), or None."""
        held = self._control.get(parameter)
        at = time.monotonic() if at is None else at
        return held[0] if held is not None and at - held[2] < LOST_AFTER_S else None

    def value(self, parameter: str, at: float | None = None) -> float:
        """The parameter's value at `at` (now): what a plugin set, or its default once
        that is more than a second old."""
        held = self._control.get(parameter)
        at = time.monotonic() if at is None else at
        if held is not None and at - held[2] < LOST_AFTER_S:
            return held[1]
        return self._range(parameter)[2]

    def applied(self, plugin: str | None = None) -> list[Injection]:
        """The injections that were applied (of `plugin`, or of everyone)."""
        return [i for i in list(self.injections)
                if i.error_id is None and (plugin is None or i.plugin == plugin)]

    def _on_loop(self, function, *args):
        async def call():
            return function(*args)

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(5)

    # -- the server -----------------------------------------------------------------

    async def _serve(self):
        server = await serve(self._handle, "127.0.0.1", self.port, compression=None)
        self.port = server.sockets[0].getsockname()[1]
        self._loop = asyncio.get_running_loop()
        self._answering = asyncio.Event()
        self._answering.set()

        async def shutdown() -> None:
            server.close()
            await server.wait_closed()
            self._sessions.clear()
            self._control.clear()
            self._prompt = None

        return shutdown

    async def _handle(self, ws: ServerConnection) -> None:
        session = _Session(ws)
        self._sessions.add(session)
        try:
            async for text in ws:
                await self._answering.wait()
                await self._reply(session, text, time.monotonic())
        except ConnectionClosed:
            pass
        finally:
            self._sessions.discard(session)
            # The prompt goes with the plugin that asked.
            if self._prompt is not None and self._prompt.session is session:
                self._prompt.decided.cancel()
                self._prompt = None

    async def _reply(self, session: _Session, text, arrived: float) -> None:
        request_id = str(uuid.uuid4())
        try:
            try:
                request = json.loads(text)
            except ValueError:
                raise ApiError(JSON_INVALID, "The JSON in the request is invalid.") from None
            if not isinstance(request, dict):
                raise ApiError(JSON_INVALID, "The request has to be a JSON object.")
            given_id = request.get("requestID")
            if given_id is not None:
                if (not isinstance(given_id, str) or not 1 <= len(given_id) <= 64
                        or not given_id.isascii()):
                    raise ApiError(REQUEST_ID_INVALID, "requestID has to be 1 to 64 ASCII "
                                   "characters.")
                request_id = given_id
            if request.get("apiName") != API_NAME:
                raise ApiError(API_NAME_INVALID, f"apiName has to be \"{API_NAME}\".")
            if request.get("apiVersion") != API_VERSION:
                raise ApiError(API_VERSION_INVALID, f"apiVersion has to be \"{API_VERSION}\".")
            message_type = request.get("messageType")
            if not isinstance(message_type, str) or not message_type:
                raise ApiError(REQUEST_TYPE_MISSING, "messageType is missing or empty.")
            if message_type not in _REPLIES:
                raise ApiError(REQUEST_TYPE_UNKNOWN, "Unknown messageType.")
            if message_type not in _NO_AUTHENTICATION:
                if session.revoked:
                    raise ApiError(TOKEN_REQUEST_DENIED, "User has denied API access for "
                                   "your plugin.")
                if session.plugin is None:
                    raise ApiError(REQUIRES_AUTHENTICATION, "This request requires "
                                   "authentication.")
            data = request.get("data")
            data = data if isinstance(data, dict) else {}
            if message_type == "AuthenticationTokenRequest":
                # Answered when the user decides; meanwhile the session goes on.
                prompt = self._open_prompt(session, data)
                task = asyncio.get_running_loop().create_task(self._await_user(prompt, request_id))
                self._waiting.add(task)  # a task nothing holds may be collected
                task.add_done_callback(self._waiting.discard)
                return
            answer = getattr(self, "_" + message_type)(session, data, arrived)
            message_type = message_type.removesuffix("Request") + "Response"
        except ApiError as error:
            message_type = "APIError"
            answer = {"errorID": error.error_id, "message": error.message}
        await self._send(session, message_type, request_id, answer)

    async def _send(self, session: _Session, message_type: str, request_id: str,
                    data: dict) -> None:
        try:
            await session.ws.send(json.dumps({
                "apiName": API_NAME, "apiVersion": API_VERSION,
                "timestamp": int(time.time() * 1000), "messageType": message_type,
                "requestID": request_id, "data": data}))
        except ConnectionClosed:
            pass

    # -- the prompt and tokens ----------------------------------------------------------

    def _open_prompt(self, session: _Session, data: dict) -> _Prompt:
        name, developer = data.get("pluginName"), data.get("pluginDeveloper")
        if not isinstance(name, str) or not 3 <= len(name) <= 32:
            raise ApiError(PLUGIN_NAME_INVALID, "pluginName has to be 3 to 32 characters.")
        if not isinstance(developer, str) or not 3 <= len(developer) <= 32:
            raise ApiError(DEVELOPER_NAME_INVALID, "pluginDeveloper has to be 3 to 32 "
                           "characters.")
        icon = data.get("pluginIcon")
        if icon is not None:
            try:
                base64.b64decode(icon, validate=True)
            except (TypeError, binascii.Error):
                raise ApiError(PLUGIN_ICON_INVALID, "pluginIcon has to be a base64 "
                               "encoded 128x128 PNG or JPG.") from None
        if self._prompt is not None:
            raise ApiError(TOKEN_REQUEST_ONGOING, "A plugin prompt is already shown to the "
                           "user.")
        self.token_requests += 1
        prompt = self._prompt = _Prompt(session, (name, developer))
        if self.user_allows is not None:
            self._decide(self.user_allows)
        return prompt

    def _decide(self, allow: bool) -> None:
        prompt, self._prompt = self._prompt, None
        if prompt is None:
            raise RuntimeError("no plugin prompt is open")
        prompt.decided.set_result(allow)

    async def _await_user(self, prompt: _Prompt, request_id: str) -> None:
        try:
            allow = await prompt.decided
        except asyncio.CancelledError:
            return  # the plugin went away first
        if allow:
            token = uuid.uuid4().hex + uuid.uuid4().hex  # 64 characters, the most allowed
            self.tokens[token] = prompt.plugin
            await self._send(prompt.session, "AuthenticationTokenResponse", request_id,
                             {"authenticationToken": token})
        else:
            await self._send(prompt.session, "APIError", request_id, {
                "errorID": TOKEN_REQUEST_DENIED,
                "message": "User has denied API access for your plugin."})

    def _revoke(self, plugin_name: str) -> None:
        self.tokens = {t: p for t, p in self.tokens.items() if p[0] != plugin_name}
        self.custom_parameters = {n: p for n, p in self.custom_parameters.items()
                                  if p["addedBy"] != plugin_name}
        for session in self._sessions:
            if session.plugin is not None and session.plugin[0] == plugin_name:
                session.plugin = None
                session.revoked = True

    # -- the requests -------------------------------------------------------------------

    def _APIStateRequest(self, session: _Session, data: dict, arrived: float) -> dict:
        return {"active": True, "vTubeStudioVersion": VERSION,
                "currentSessionAuthenticated": session.plugin is not None}

    def _AuthenticationRequest(self, session: _Session, data: dict, arrived: float) -> dict:
        for key, error_id in (("authenticationToken", TOKEN_MISSING),
                              ("pluginName", PLUGIN_NAME_MISSING),
                              ("pluginDeveloper", PLUGIN_DEVELOPER_MISSING)):
            if not isinstance(data.get(key), str) or not data[key]:
                raise ApiError(error_id, f"{key} is missing.")
        plugin = (data["pluginName"], data["pluginDeveloper"])
        if self.tokens.get(data["authenticationToken"]) != plugin:
            return {"authenticated": False, "reason": "Token invalid. The plugin has to ask "
                    "for a new token, or the user revoked access."}
        session.plugin = plugin
        session.revoked = False
        return {"authenticated": True, "reason": "Token valid. The plugin is authenticated "
                "for the duration of this session."}

    def _ParameterCreationRequest(self, session: _Session, data: dict, arrived: float) -> dict:
        name = data.get("parameterName")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ApiError(PARAM_NAME_INVALID, "parameterName has to be 4 to 32 letters or "
                           "digits, no spaces.")
        if name in DEFAULT_PARAMETERS:
            raise ApiError(PARAM_DEFAULT_NAME_NOT_ALLOWED, f"{name} is a default parameter.")
        if not all(_number(data.get(k)) for k in ("min", "max", "defaultValue")):
            raise ApiError(PARAM_VALUES_INVALID, "min, max and defaultValue have to be "
                           "numbers between -1000000 and 1000000.")
        explanation = data.get("explanation", "")
        if not isinstance(explanation, str) or len(explanation) >= 256:
            raise ApiError(PARAM_EXPLANATION_TOO_LONG, "explanation has to be a string of "
                           "less than 256 characters.")
        plugin = session.plugin[0]
        existing = self.custom_parameters.get(name)
        if existing is not None and existing["addedBy"] != plugin:
            raise ApiError(PARAM_CREATED_BY_OTHER_PLUGIN, f"Parameter {name} was already "
                           f"created by plugin {existing['addedBy']}.")
        if existing is None:
            own = sum(p["addedBy"] == plugin for p in self.custom_parameters.values())
            if own >= PER_PLUGIN_LIMIT:
                raise ApiError(PARAM_LIMIT_PER_PLUGIN, "A plugin can create at most 100 "
                               "custom parameters.")
            if len(self.custom_parameters) >= TOTAL_LIMIT:
                raise ApiError(PARAM_LIMIT_TOTAL, "There can be at most 300 custom "
                               "parameters.")
        self.custom_parameters[name] = {
            "addedBy": plugin, "explanation": explanation, "min": float(data["min"]),
            "max": float(data["max"]), "defaultValue": float(data["defaultValue"])}
        return {"parameterName": name}

    def _InputParameterListRequest(self, session: _Session, data: dict, arrived: float) -> dict:
        def listed(name: str, added_by: str) -> dict:
            low, high, default = self._range(name)
            return {"name": name, "addedBy": added_by, "value": self.value(name, arrived),
                    "min": low, "max": high, "defaultValue": default}

        return {"modelLoaded": True, "modelName": "Harness model", "modelID": "harness",
                "customParameters": [listed(n, p["addedBy"])
                                     for n, p in self.custom_parameters.items()],
                "defaultParameters": [listed(n, "VTube Studio") for n in DEFAULT_PARAMETERS]}

    def _InjectParameterDataRequest(self, session: _Session, data: dict, arrived: float) -> dict:
        plugin = session.plugin[0]
        mode = data.get("mode") or "set"
        entries = data.get("parameterValues")
        values = {}
        error = None
        try:
            if mode not in ("set", "add"):
                raise ApiError(INJECT_MODE_UNKNOWN, "mode has to be \"set\" or \"add\".")
            if not isinstance(entries, list) or not entries:
                raise ApiError(INJECT_NO_DATA, "You have to provide data to inject.")
            for entry in entries:
                name = entry.get("id") if isinstance(entry, dict) else None
                if not isinstance(name, str) or (name not in DEFAULT_PARAMETERS
                                                 and name not in self.custom_parameters):
                    raise ApiError(INJECT_PARAM_NOT_FOUND, f"Parameter {name} not found. Did "
                                   "you create it yet?")
                if not _number(entry.get("value")):
                    raise ApiError(INJECT_VALUE_INVALID, f"The value for {name} has to be a "
                                   "number between -1000000 and 1000000.")
                weight = entry.get("weight", 1.0)
                if not _number(weight) or not 0.0 <= weight <= 1.0:
                    raise ApiError(INJECT_WEIGHT_INVALID, f"The weight for {name} has to be "
                                   "between 0 and 1.")
                held = self.controller(name, arrived)
                if mode == "set" and held is not None and held != plugin:
                    raise ApiError(INJECT_PARAM_CONTROLLED_BY_OTHER_PLUGIN, f"Parameter {name} "
                                   f"is currently controlled by another plugin ({held}).")
                values[name] = (float(entry["value"]), float(weight))
        except ApiError as exc:
            error = exc
        sent = {e.get("id"): e.get("value") for e in entries or () if isinstance(e, dict)}
        self.injections.append(Injection(arrived, plugin, sent, mode,
                                         data.get("faceFound") is True,
                                         None if error is None else error.error_id))
        if error is not None:
            raise error
        if mode == "set":  # "add" takes control of nothing; it is only recorded here
            for name, (value, weight) in values.items():
                mixed = weight * value + (1.0 - weight) * self._range(name)[2]
                self._control[name] = (plugin, mixed, arrived)
        return {}

    def _range(self, name: str) -> tuple[float, float, float]:
        if name in DEFAULT_PARAMETERS:
            return DEFAULT_PARAMETERS[name]
        p = self.custom_parameters.get(name)
        return (p["min"], p["max"], p["defaultValue"]) if p is not None else (0.0, 1.0, 0.0)
