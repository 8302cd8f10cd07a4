"""The API's Channel on a real aiohttp WebSocket: a client that never reads is cut off once
one send has waited the stall timeout, and only that connection."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from app.api.channel import Channel
from tests.harness.app_process import free_port
from tests.harness.raw_websocket import raw_websocket

STALL_S = 0.5


def test_a_send_that_waits_past_the_stall_timeout_ends_that_connection():
    port = free_port()
    seen: dict = {}

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        channel = Channel(ws, request, stall_timeout_s=STALL_S)
        sends = 0
        last_done = time.monotonic()
        while await channel.send_bytes(b"\0" * 65536):
            sends += 1
            last_done = time.monotonic()
        seen.update(sends=sends, waited_s=time.monotonic() - last_done,
                    again=await channel.send_bytes(b"\0"))
        return ws

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/ws", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        stuck = await asyncio.to_thread(raw_websocket, port)
        try:
            while "sends" not in seen:
                await asyncio.sleep(0.05)
        finally:
            stuck.close()
            await runner.cleanup()

    asyncio.run(asyncio.wait_for(main(), 30))
    # The kernel's buffers take a few sends, then one waits: it ends when the timeout
    # fires (STALL_S after it began), give or take a turn of the loop; 1 s more is room
    # for a loaded CI machine to run that turn, not the timeout's own slack.
    assert seen["sends"] >= 1
    assert STALL_S <= seen["waited_s"] < STALL_S + 1.0
    assert seen["again"] is False  # the connection is gone: later sends say so at once
