"""One API WebSocket connection's two sides: what it sends (Channel) and how fast it may
send to us (RateLimit).

Every send goes through the channel, so a reply and a stream's audio never interleave
inside one frame, and a client that does not read cannot hold the server: a send waits
for the socket to drain (aiohttp's writer limit), and one that waits longer than
STALL_TIMEOUT_S closes that connection alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from app.api.protocol import ApiFault, dumps, parse, request_id

# The name of the token a request came with (None: none, or not one we know).
TOKEN_NAME = web.RequestKey("token_name", object)
# A client whose socket took nothing for this long is cut off (a live client reconnects).
STALL_TIMEOUT_S = 10.0


class Channel:
    def __init__(self, ws: web.WebSocketResponse, request: web.Request,
                 stall_timeout_s: float = STALL_TIMEOUT_S) -> None:
        self.ws = ws
        self._request = request
        self._lock = asyncio.Lock()
        self._stall = stall_timeout_s
        self.sent_bytes = 0

    @property
    def closed(self) -> bool:
        return self.ws.closed

    async def send(self, message: dict) -> bool:
        """Send a JSON message; False once the connection is gone."""
        return await self._send(self.ws.send_str, dumps(message))

    async def send_bytes(self, data: bytes) -> bool:
        return await self._send(self.ws.send_bytes, data)

    async def fault(self, fault: ApiFault, request_id=None) -> bool:
        return await self.send(fault.reply(request_id))

    async def close(self, code: int = 1000, message: str = "") -> None:
        # Not prepared: the request was no WebSocket handshake (a plain GET), and its
        # refusal is answered already.
        if self.ws.prepared and not self.ws.closed:
            try:
                await asyncio.wait_for(self.ws.close(code=code, message=message.encode()[:120]),
                                       self._stall)
            except (TimeoutError, ConnectionError):
                self._abort()

    async def _send(self, send, data) -> bool:
        if self.ws.closed:
            return False
        async with self._lock:
            try:
                # wait_for, not a timeout scope: it runs the send as a task of its own, so
                # every send lets the loop serve the other connections. Under a timeout
                # scope a client flooding /control had its replies sent without a pause
                # (55,000-59,000 a second) and a bystander's pings took 170-230 ms, against
                # at most 6 ms with wait_for (tests/test_faults.py's flood test, 2-vCPU VM).
                await asyncio.wait_for(send(data), self._stall)
            except TimeoutError:
                self._abort()
                return False
            except (ConnectionError, RuntimeError):  # closing, or closed under us
                return False
        self.sent_bytes += len(data)
        return True

    def _abort(self) -> None:
        transport = self._request.transport
        if transport is not None:
            transport.abort()


class RateLimit:
    """At most `per_second` messages in any one second (a token bucket holding a
    second's worth): `allow()` says whether this one may go on. `on_flood()` is called at
    the first message refused of a flood, which ends once a whole second's allowance has
    gone unused (so a client sending past its rate for minutes is one flood)."""

    def __init__(self, per_second: int, now: Callable[[], float] = time.monotonic,
                 on_flood: Callable[[], None] = lambda: None) -> None:
        self._rate = float(per_second)
        self._tokens = float(per_second)
        self._now = now
        self._last = now()
        self._flooding = False
        self.on_flood = on_flood

    def allow(self) -> bool:
        now = self._now()
        self._tokens = min(self._rate, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens >= self._rate:
            self._flooding = False
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        if not self._flooding:
            self._flooding = True
            self.on_flood()
        return False

    def fault(self) -> ApiFault:
        return ApiFault("rate_limited", f"more than {self._rate:g} messages in a second "
                        "(api_messages_per_second in the settings): this one was not taken")


async def incoming(ws: web.WebSocketResponse, channel: Channel, limit: RateLimit,
                   max_bytes: int) -> AsyncIterator[tuple[dict, object]]:
    """A connection's messages, parsed, with their "id" (None without one). What is over
    the rate, too large or not a message is answered with its error here and skipped."""
    async for message in ws:
        if message.type not in (web.WSMsgType.TEXT, web.WSMsgType.BINARY):
            continue
        if not limit.allow():
            await channel.fault(limit.fault())
            continue
        try:
            data = parse(message.data, max_bytes)
        except ApiFault as fault:
            await channel.fault(fault)
            continue
        yield data, request_id(data)
