"""Control of the app over the API: the `/control` WebSocket (commands, replies and the
app's events as they happen) and plain HTTP for tools that only do HTTP (`POST /speak`,
`POST /stop`, `GET /status`).

Commands run on the studio's thread (ApiServer.on_studio); each gets one reply, with the
command's ``"id"`` when it had one. A connection without a token may only ask for one
(``request_token``: the user allows or denies it in the app) or sign in with one
(``authenticate``).

Events: after ``{"type": "subscribe", "events": [...]}`` the connection gets each of
those events of the app's catalogue (pipeline/core/events.py, in its JSON form) as it is
published, media times also as the wall-clock instant they are heard. Events are queued
per connection (EVENT_QUEUE); a client that reads slower than they come loses the
oldest, and the next event it gets says how many (``"dropped"``).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from aiohttp import web

from app.api.channel import TOKEN_NAME, Channel, incoming
from app.api.protocol import ApiFault, dumps, field
from app.api.speech import json_body
from app.api.tokens import TokenError, check_name
from app.avatar_library import read_avatar
from app.speech_queue import MODES
from pipeline.core.events import EVENT_KINDS, event_json
from pipeline.core.modes import MODE_NAMES
from pipeline.text.input import TextInputError
from render.rigs.manifest import RigError

# Events waiting per connection: a speech's visemes arrive a sentence at a time (~50
# events for a long sentence), so this holds several sentences.
EVENT_QUEUE = 512
SPEAK_MODES = MODES


class _Events:
    """One connection's subscription: bus events to its queue, from the publishing thread
    to the server's loop, without blocking the publisher."""

    def __init__(self, server, channel: Channel) -> None:
        self._server = server
        self._channel = channel
        self._loop = asyncio.get_running_loop()
        self._queue: deque[dict] = deque(maxlen=EVENT_QUEUE)
        self._ready = asyncio.Event()
        self._dropped = 0
        self._unsubscribe = None
        self._sender = asyncio.create_task(self._send())
        self.names: set[str] = set()

    def subscribe(self, names: set[str]) -> None:
        self.names |= names
        self._resubscribe()

    def unsubscribe(self, names: set[str]) -> None:
        self.names -= names
        self._resubscribe()

    def _resubscribe(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self.names:
            kinds = [EVENT_KINDS[name] for name in sorted(self.names)]
            self._unsubscribe = self._server.studio.engine.events.subscribe(self._publish, *kinds)

    def _publish(self, event) -> None:
        # On the publisher's thread (the speaker's, the mic's): format and hand over.
        clock = self._server.studio.engine.clock
        offset = time.time() - time.monotonic()
        message = event_json(event, lambda media: clock.monotonic_at(media) + offset)
        try:
            self._loop.call_soon_threadsafe(self._enqueue, message)
        except RuntimeError:  # the loop has closed
            pass

    def _enqueue(self, message: dict) -> None:
        if len(self._queue) == self._queue.maxlen:
            self._dropped += 1
        self._queue.append(message)
        self._ready.set()

    async def _send(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            while self._queue:
                message = self._queue.popleft()
                if self._dropped:
                    message = {**message, "dropped": self._dropped}
                    self._dropped = 0
                if not await self._channel.send(message):
                    return

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._sender.cancel()


async def control_socket(server, request: web.Request) -> web.StreamResponse:
    ws = web.WebSocketResponse(max_msg_size=server.hard_cap, compress=False)
    await ws.prepare(request)
    channel = Channel(ws, request)
    server.sockets[ws] = request[TOKEN_NAME]
    events = _Events(server, channel)
    limit = server.rate_limit(lambda: server.sockets.get(ws))  # signed in later, maybe
    try:
        async for data, reply_to in incoming(ws, channel, limit, server.config.max_message_bytes):
            try:
                reply = await _command(server, ws, events, data)
            except ApiFault as fault:
                reply = fault.reply()
            if reply_to is not None:
                reply["id"] = reply_to
            await channel.send(reply)
    finally:
        events.close()
        server.sockets.pop(ws, None)
        await channel.close()
    return ws


async def _command(server, ws, events: _Events, data: dict) -> dict:
    kind = data["type"]
    if kind == "ping":
        return {"type": "pong"}
    if kind == "request_token":
        try:
            name = check_name(field(data, "name", str))
        except TokenError as exc:
            raise ApiFault("bad_field", str(exc)) from None
        token = await server.request_token(name)
        server.sockets[ws] = name
        return {"type": "token", "name": name, "token": token}
    if kind == "authenticate":
        name = await server.token_name(field(data, "token", str))
        if name is None:
            raise ApiFault("unauthorized", "this app does not know that token")
        server.sockets[ws] = name
        return {"type": "authenticated", "name": name}
    if server.sockets.get(ws) is None:
        raise ApiFault("unauthorized", "sign in first: connect with a token, send "
                       '{"type": "authenticate", "token": ...}, or ask for one with '
                       '{"type": "request_token", "name": ...}')
    if kind == "subscribe" or kind == "unsubscribe":
        names = field(data, "events", list)
        if not all(isinstance(n, str) for n in names):
            raise ApiFault("bad_field", '"events" must be a list of event names (strings)')
        unknown = [n for n in names if n not in EVENT_KINDS and n != "all"]
        if unknown:
            raise ApiFault("bad_field", f"unknown events {unknown}: the events are "
                           + ", ".join(sorted(EVENT_KINDS)) + ", or all")
        chosen = set(EVENT_KINDS) if "all" in names else set(names)
        (events.subscribe if kind == "subscribe" else events.unsubscribe)(chosen)
        return {"type": "subscribed", "events": sorted(events.names)}
    if kind in HTTP_COMMANDS:
        return await HTTP_COMMANDS[kind](server, data)
    raise ApiFault("unknown_type", f"{kind!r} is not a command: the commands are "
                   + ", ".join(sorted(["ping", "request_token", "authenticate", "subscribe",
                                       "unsubscribe", *HTTP_COMMANDS])))


# -- the commands, shared by /control and HTTP -----------------------------------------

async def _speak(server, data: dict) -> dict:
    text = field(data, "text", str)
    mode = field(data, "mode", str, required=False, choices=SPEAK_MODES)

    def speak() -> dict | str | None:
        studio = server.studio
        try:
            entry = studio.say(text, mode, source="api")
        except TextInputError as exc:  # read for the voice's own language
            return str(exc)
        if entry is None:
            return None
        queue = studio.queue
        speaking = queue.current is not None and queue.current.id == entry.id
        return {"entry": entry.id, "request": queue.request if speaking else None,
                "position": 0 if speaking else 1 + [e.id for e in queue.waiting].index(entry.id)}

    said = await server.on_studio(speak)
    if said is None:
        raise ApiFault("voice_loading", "the voice is still loading; try again shortly")
    if isinstance(said, str):
        raise ApiFault("nothing_to_speak", said)
    return {"type": "speaking", **said}


async def _append(server, data: dict) -> dict:
    text = field(data, "text", str)
    final = field(data, "final", bool, required=False, default=True)
    if not server.studio.voice_ready_for_speech:
        raise ApiFault("voice_loading", "the voice is still loading; try again shortly")
    request = await server.on_studio(lambda: server.studio.append(text, final))
    return {"type": "appended", "request": request, "held": request is None}


async def _stop(server, data: dict) -> dict:
    await server.on_studio(server.studio.stop)
    return {"type": "stopped"}


async def _latency_mode(server, data: dict) -> dict:
    mode = field(data, "mode", str, choices=MODE_NAMES)
    await server.on_studio(lambda: server.studio.set_latency_mode(mode))
    return {"type": "latency_mode", "mode": mode}


async def _avatar(server, data: dict) -> dict:
    avatar = field(data, "avatar", str, required=False)
    try:
        # Read on a worker, not the studio's (GUI) thread, whose display ticks it would
        # hold up: 43 ms for the bundled sprite rig and 90-140 ms for a photo one on the
        # 2-vCPU VM, the largest part of an avatar switch's busy stalls in bench/soak.py.
        read = await asyncio.to_thread(read_avatar, avatar or None)
        rig = await server.on_studio(lambda: server.studio.set_avatar(avatar or None, read))
    except (RigError, ValueError) as exc:  # PortraitError is a ValueError
        raise ApiFault("not_found", f"the avatar was not changed: {exc}") from None
    return {"type": "avatar", "name": rig.name, "avatar": avatar or None}


async def _expression(server, data: dict) -> dict:
    expression = field(data, "expression", str)

    refused = await server.on_studio(lambda: server.studio.set_expression(expression))
    if refused is not None:
        raise ApiFault("not_supported", refused)
    return {"type": "expression", "expression": expression,
            "expressions": list(await server.on_studio(lambda: server.studio.expressions))}


async def _status(server, data: dict) -> dict:
    return {"type": "status", **await server.on_studio(server.studio.status),
            "api": {"streams": server.streams, "connections": len(server.sockets)}}


HTTP_COMMANDS = {"speak": _speak, "append": _append, "stop": _stop,
                 "set_latency_mode": _latency_mode, "set_avatar": _avatar,
                 "set_expression": _expression, "status": _status}


async def _http(server, request: web.Request, command) -> web.Response:
    try:
        data = await json_body(server, request) if request.method == "POST" else {}
        return web.Response(text=dumps(await command(server, data)),
                            content_type="application/json")
    except ApiFault as fault:
        return server.fault_response(fault)


async def speak_http(server, request: web.Request) -> web.Response:
    return await _http(server, request, _speak)


async def stop_http(server, request: web.Request) -> web.Response:
    return await _http(server, request, _stop)


async def status_http(server, request: web.Request) -> web.Response:
    return await _http(server, request, _status)
