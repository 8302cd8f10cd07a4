"""A network server on an asyncio loop of its own thread: what the browser source and the
API server both are, whichever library serves (websockets, aiohttp).

`ServerThread.start(serve)` runs ``await serve()`` on a new loop in a daemon thread:
`serve` binds its sockets and returns a coroutine function that shuts them down. Binding
is done before start() returns, so a port in use is an error of start() itself, said in
one line for the user (`listen_error`), and after start() every call may reach the loop
(`call`, `loop`). stop() runs the shutdown on the loop, then ends the loop and its thread.
"""

from __future__ import annotations

import asyncio
import errno
import threading
from collections.abc import Awaitable, Callable

START_TIMEOUT_S = 10.0

Shutdown = Callable[[], Awaitable[None]]


class ServerError(RuntimeError):
    """The server cannot serve; the message is one line for the user."""


def listen_error(exc: OSError, what: str, host: str, port: int, where_to_change: str) -> str:
    """One line for the user about a failed bind: a port taken, or anything else."""
    if exc.errno == errno.EADDRINUSE:
        return (f"Port {port} is in use by another program; choose another port in "
                f"{where_to_change}")
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{what} cannot listen on {host}: that address is not one of this computer's"
    return f"{what} cannot listen on {host}:{port}: {exc.strerror or exc}"


class ServerThread:
    """One start() per object; stop() is safe to call twice, and before start()."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None

    def start(self, serve: Callable[[], Awaitable[Shutdown]]) -> None:
        """Bind and serve; raises what `serve` raised (ServerError for the user)."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name}: start() called twice")
        self._thread = threading.Thread(target=self._run, args=(serve,), name=self.name,
                                        daemon=True)
        self._thread.start()
        if not self._started.wait(START_TIMEOUT_S):
            raise ServerError(f"{self.name} did not start within {START_TIMEOUT_S:.0f} s")
        if self._error is not None:
            self._thread.join()
            raise self._error

    def call(self, callback: Callable[..., object], *args) -> None:
        """Run `callback(*args)` on the loop, from any thread (dropped once stopped)."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(callback, *args)
            except RuntimeError:  # the loop closed between the check and the call
                pass

    def stop(self) -> None:
        if self._thread is None or self.loop is None or self._stop is None:
            return
        self.call(self._stop.set)
        self._thread.join()
        self._stop = None

    def _run(self, serve) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._serve(serve, loop))
        finally:
            loop.close()

    async def _serve(self, serve, loop) -> None:
        try:
            shutdown = await serve()
        except BaseException as exc:  # noqa: BLE001 - handed to start()'s caller
            self._error = exc
            self._started.set()
            return
        self._stop = asyncio.Event()
        self.loop = loop
        self._started.set()
        await self._stop.wait()
        await shutdown()
