"""The browser source: the live avatar on a transparent page served on 127.0.0.1, for
OBS's browser source and any browser.

One port serves both the page (``/``: ``assets/web/avatar.html`` and its script and style)
and the WebSocket that feeds it (``/ws``), through the ``websockets`` library: its
``process_request`` answers the plain HTTP GETs, so one server, one loop and one port
error cover both, and a stdlib HTTP server thread is not needed.

Threads and hand-offs (none of them waits on a client):

- the caller's (render) thread: ``send`` copies the frame into the back buffer of a
  triple buffer (preallocated; it is re-made only when the frame size changes), swaps it
  with the pending one under a lock held for two assignments, and wakes the encoder. A
  frame still pending when the next arrives is replaced (counted as ``coalesced``). With
  no client connected, ``send`` returns once it has checked the frame.
- ``browser-encode``: takes the pending frame, crops it to its visible rectangle and
  encodes it once into one message that every client shares (browser_wire.py), then hands
  it to the loop.
- ``browser-source`` (asyncio loop): the server; each client has a queue of one frame: a
  newer frame replaces a waiting one (the oldest is dropped, counted per client) while
  that client's sender is still writing the previous one. A client that does not read
  holds at most: the one queued frame, and its write buffer, which ``send`` fills with at
  most one frame beyond ``WRITE_LIMIT`` before it waits for the socket to drain. One
  whose socket takes nothing for ``stall_timeout_s`` is disconnected (websockets'
  keepalive cannot: its ping waits behind the full buffer).

The messages and their encoding are browser_wire.py's (its docstring: the wire
format, the encodings measured, un-premultiplying). Anything a client sends that is
neither a paint nor a probe's answer is ignored (counted as ``ignored``); a message over
``MAX_CLIENT_MESSAGE`` bytes closes that client only. Paint acks also pace the sending:
at most ``WINDOW`` frames are on their way to a page at once.

Frame delay (send → the page's paint) is measured without trusting either clock's
origin: the page's clock is mapped to ours by probes (we send ``{"sync": n}`` at time s0,
the page answers at once with its time t, we receive it at s1; offset = t − (s0 + s1)/2,
uncertain by ±(s1 − s0)/2, and the probe with the smallest round trip is kept; both are
monotonic clocks of one machine, so the offset does not drift). A paint at page time t is
then at our time t − offset, and its delay is that minus the ``perf_counter()`` of the
``send`` call. The page paints in its ``requestAnimationFrame`` callback, so the delay
includes waiting for the page's next frame (up to one refresh period).
"""

from __future__ import annotations

import asyncio
import http
import itertools
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from pipeline.core.resources import ASSETS_DIR
from pipeline.core.server_thread import ServerError, ServerThread, listen_error
from render.outputs.browser_wire import (
    ENCODINGS,
    MAX_SIDE,
    PNG,
    Painted,
    ProbeAnswer,
    caption_message,
    decode_page_message,
    encode_frame,
    probe_message,
)

WEB_DIR = ASSETS_DIR / "web"
WS_PATH = "/ws"
# Frames sent to a page and not yet acknowledged as painted: one on the wire or being
# decoded while the page paints the other. Without this, a page slower than the frame
# rate has the kernel's socket buffers (megabytes on loopback) fill with old frames:
# 330 ms of delay measured at 512² before it. Clients that do not acknowledge (or have
# not for ACK_TIMEOUT_S) get TCP's backpressure only.
WINDOW = 2
ACK_TIMEOUT_S = 1.0
# Frames waiting per client besides the one being written: one, so a client that falls
# behind gets the newest frame next; a second would only show it a frame later.
CLIENT_QUEUE = 1
# The server's write buffer high-water mark per client (websockets' default, 32 KiB).
WRITE_LIMIT = 2**15
# What a client may send: acks and probe answers are under 100 bytes.
MAX_CLIENT_MESSAGE = 4096
# Recent paint delays kept per client for the P50/P99 in stats (10 s at 60 fps).
DELAY_WINDOW = 600
# Publish times kept to match acks to; an ack older than this many frames is not timed.
PUBLISH_RING = 1024
# Clock probes: a burst at connect, then one a second (the smallest round trip is kept).
PROBE_BURST, PROBE_BURST_GAP_S, PROBE_INTERVAL_S = 5, 0.05, 1.0
# A client whose socket took nothing for this long is cut off; a live page reconnects.
STALL_TIMEOUT_S = 10.0
# Closing a client that does not read waits this long for its close handshake.
CLOSE_TIMEOUT_S = 1.0
_CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                  ".css": "text/css; charset=utf-8"}


class BrowserSourceError(RuntimeError):
    """The browser source cannot serve; the message is one line for the user."""


def _percentile_ms(values, q: float) -> float | None:
    return float(np.percentile(np.asarray(values), q) * 1e3) if len(values) else None


@dataclass(frozen=True)
class ClientStats:
    """One connected client. `dropped`: frames replaced in its queue before it took them;
    `buffered_bytes`: in our write buffer for it; delays, over its last DELAY_WINDOW acked
    frames (None for clients that do not ack, or before the first clock probe came back):
    send → its paint, and send → ready to paint (received, and decoded for PNG),
    before waiting for the page's next animation frame; their difference depends on the
    phase of our frames against the page's, which neither side sets."""

    id: int
    peer: str
    sent: int
    dropped: int
    queued: int
    buffered_bytes: int
    painted: int
    ignored: int
    delay_p50_ms: float | None
    delay_p99_ms: float | None
    ready_p50_ms: float | None
    ready_p99_ms: float | None
    clock_uncertainty_ms: float | None


@dataclass(frozen=True)
class BrowserSourceStats:
    """`published`: send calls with a client connected; `coalesced`: of those, frames
    replaced before the encoder took them; `encoded`: frames sent to the clients."""

    published: int
    coalesced: int
    encoded: int
    encode_p50_ms: float | None
    encode_p99_ms: float | None
    delay_p50_ms: float | None
    delay_p99_ms: float | None
    clients: tuple[ClientStats, ...]


class _Slot:
    __slots__ = ("pixels", "seq", "media_time")

    def __init__(self) -> None:
        self.pixels: np.ndarray | None = None
        self.seq = 0
        self.media_time = 0.0


@dataclass(frozen=True)
class _Frame:
    seq: int
    message: bytes | bytearray


class _Client:
    """Owned by the loop thread; stats() reads its counters from others (GIL-atomic)."""

    def __init__(self, connection: ServerConnection, number: int) -> None:
        self.connection = connection
        self.id = number
        peer = connection.remote_address
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.queue: deque[_Frame] = deque(maxlen=CLIENT_QUEUE)
        self.wake = asyncio.Event()
        # Frame numbers sent and not yet acknowledged, oldest first.
        self.in_flight: deque[int] = deque(maxlen=WINDOW)
        self.last_ack = -float("inf")
        self.sent = self.dropped = self.painted = self.ignored = 0
        self.delays: deque[float] = deque(maxlen=DELAY_WINDOW)
        self.ready_delays: deque[float] = deque(maxlen=DELAY_WINDOW)
        self.probes: dict[int, float] = {}
        self.offset_s: float | None = None  # page clock − our clock
        self.best_rtt_s = float("inf")

    def offer(self, frame: _Frame) -> None:
        if len(self.queue) == CLIENT_QUEUE:
            self.dropped += 1
        self.queue.append(frame)
        self.wake.set()

    def window_full(self) -> bool:
        return (len(self.in_flight) == WINDOW
                and time.perf_counter() - self.last_ack < ACK_TIMEOUT_S)

    def acknowledge(self, seq: int) -> None:
        """Painted `seq`: it and every frame before it (those the page skipped) are done."""
        self.last_ack = time.perf_counter()
        while self.in_flight and self.in_flight[0] <= seq:
            self.in_flight.popleft()
        self.wake.set()

    def stats(self) -> ClientStats:
        delays, ready = tuple(self.delays), tuple(self.ready_delays)
        transport = self.connection.transport
        return ClientStats(
            self.id, self.peer, self.sent, self.dropped, len(self.queue),
            transport.get_write_buffer_size() if transport else 0, self.painted,
            self.ignored, _percentile_ms(delays, 50), _percentile_ms(delays, 99),
            _percentile_ms(ready, 50), _percentile_ms(ready, 99),
            self.best_rtt_s * 500 if self.offset_s is not None else None)


class BrowserSource:
    """Serves the avatar page and its frames on http://host:port/ until stop().

    One start() per object. Invariants: send() never waits for a client, the encoder or the loop, and
    allocates nothing unless the frame size changed; each published frame is encoded at
    most once, whatever the number of clients; a client's memory is bounded by one queued
    frame plus one frame in its write buffer.
    """

    def __init__(self, port: int, host: str = "127.0.0.1", encoding: str = PNG,
                 stall_timeout_s: float = STALL_TIMEOUT_S) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"encoding {encoding!r} is not one of {ENCODINGS}")
        self.port = port
        self.host = host
        self.encoding = encoding
        self.stall_timeout_s = stall_timeout_s
        self._clients: dict[int, _Client] = {}
        self._next_client = 0
        self._server = ServerThread("browser-source")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._encoder: threading.Thread | None = None
        self._stopping = False
        self._files = {}
        # The triple buffer between send() and the encoder.
        self._lock = threading.Lock()
        self._back, self._pending, self._front = _Slot(), _Slot(), _Slot()
        self._fresh = False
        self._frame_ready = threading.Event()
        self._published = self._coalesced = self._encoded = 0
        self._publish_times = np.zeros(PUBLISH_RING, np.float64)
        self._publish_seqs = np.full(PUBLISH_RING, -1, np.int64)
        self._encode_times: deque[float] = deque(maxlen=DELAY_WINDOW)
        self._caption_message: str | None = None

    # -- the caller's side ------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    @property
    def clients(self) -> int:
        return len(self._clients)

    def start(self) -> None:
        """Serve from now on; BrowserSourceError (port in use, ...) if it cannot."""
        self._files = {f"/{p.name}": (p.read_bytes(), _CONTENT_TYPES[p.suffix])
                       for p in WEB_DIR.iterdir() if p.suffix in _CONTENT_TYPES}
        self._files["/"] = self._files["/avatar.html"]
        try:
            self._server.start(self._serve)
        except ServerError as exc:
            raise BrowserSourceError(str(exc)) from None
        self._encoder = threading.Thread(target=self._run_encoder, name="browser-encode",
                                         daemon=True)
        self._encoder.start()

    def send(self, rgba: np.ndarray, media_time: float) -> None:
        """Offer the frame presented now: H×W×4 uint8 premultiplied RGBA, rows top to
        bottom, any strides (a flipped view of a readback is fine). Copied; the caller may
        reuse its array at once. Call it from one thread only."""
        now = time.perf_counter()
        if (rgba.dtype != np.uint8 or rgba.ndim != 3 or rgba.shape[2] != 4
                or not 0 < rgba.shape[0] <= MAX_SIDE or not 0 < rgba.shape[1] <= MAX_SIDE):
            raise ValueError(f"send takes H×W×4 uint8 RGBA up to {MAX_SIDE} a side, "
                             f"not {rgba.dtype} {rgba.shape}")
        if not self._clients:
            return
        slot = self._back  # only this thread touches the back buffer
        if slot.pixels is None or slot.pixels.shape != rgba.shape:
            slot.pixels = np.empty(rgba.shape, np.uint8)
        np.copyto(slot.pixels, rgba)
        seq = self._published
        slot.seq, slot.media_time = seq, media_time
        self._publish_times[seq % PUBLISH_RING] = now
        self._publish_seqs[seq % PUBLISH_RING] = seq
        with self._lock:
            self._back, self._pending = self._pending, slot
            superseded, self._fresh = self._fresh, True
        self._published = seq + 1
        if superseded:
            self._coalesced += 1
        self._frame_ready.set()

    def set_caption(self, text: str, style: Mapping[str, str] | None = None) -> None:
        """Show `text` in the page (empty hides it). `style`: CSS values for the keys in
        CAPTION_STYLE_KEYS; "position" is "bottom" (default) or "top". Any thread."""
        message = caption_message(text, style)
        self._caption_message = message
        loop = self._loop
        if loop is not None and not self._stopping:
            loop.call_soon_threadsafe(self._broadcast_text, message)

    def stats(self) -> BrowserSourceStats:
        clients = tuple(c.stats() for c in tuple(self._clients.values()))
        encode = tuple(self._encode_times)
        delays = [d / 1e3 for d in self.delays_ms()]
        return BrowserSourceStats(
            self._published, self._coalesced, self._encoded,
            _percentile_ms(encode, 50), _percentile_ms(encode, 99),
            _percentile_ms(delays, 50), _percentile_ms(delays, 99), clients)

    def delays_ms(self, until: str = "paint") -> list[float]:
        """Every connected client's recent delays (the last DELAY_WINDOW each), oldest
        first per client, in ms: send → paint, or → "ready" to paint (ClientStats)."""
        return [d * 1e3 for c in tuple(self._clients.values())
                for d in tuple(c.delays if until == "paint" else c.ready_delays)]

    def viewer_delay_s(self) -> float | None:
        """How long after send() the pages paint a frame now: the median of every
        connected page's recent delays (None before any was measured)."""
        delays = self.delays_ms()
        return float(np.median(delays)) / 1e3 if delays else None

    def stop(self) -> None:
        """Close every client (going away: pages reconnect when a server is back) and the
        port. Takes at most CLOSE_TIMEOUT_S more for a client that does not read."""
        if self._loop is None or self._stopping:
            return
        self._stopping = True
        self._frame_ready.set()
        if self._encoder is not None:
            self._encoder.join()
        self._server.stop()

    # -- the encoder ------------------------------------------------------------------

    def _take_pending(self) -> _Slot | None:
        with self._lock:
            if not self._fresh:
                return None
            self._front, self._pending = self._pending, self._front
            self._fresh = False
            return self._front

    def _run_encoder(self) -> None:
        while True:
            self._frame_ready.wait()
            self._frame_ready.clear()
            if self._stopping:
                return
            slot = self._take_pending()
            if slot is None:
                continue
            t0 = time.perf_counter()
            # A new message per frame: clients still writing older ones keep theirs.
            message = encode_frame(slot.pixels, slot.seq, slot.media_time, self.encoding)
            self._encode_times.append(time.perf_counter() - t0)
            self._encoded += 1
            self._loop.call_soon_threadsafe(self._fan_out, _Frame(slot.seq, message))

    # -- the loop ---------------------------------------------------------------------

    async def _serve(self):
        origins = [None, *{f"http://{h}:{self.port}" for h in (self.host, "127.0.0.1",
                                                              "localhost")}]
        try:
            server = await serve(
                self._handle, self.host, self.port, process_request=self._http,
                origins=origins, max_size=MAX_CLIENT_MESSAGE, max_queue=4,
                write_limit=WRITE_LIMIT, close_timeout=CLOSE_TIMEOUT_S, compression=None)
        except OSError as exc:
            raise ServerError(listen_error(exc, "The browser source", self.host, self.port,
                                           "Settings → Browser source, or "
                                           "--browser-source-port")) from None
        self._loop = asyncio.get_running_loop()

        async def shutdown() -> None:
            server.close()
            await server.wait_closed()

        return shutdown

    def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        """The page's files for plain GETs; None lets the WebSocket handshake go on."""
        path = request.path.split("?", 1)[0]
        if path == WS_PATH:
            return None
        if path == "/favicon.ico":  # browsers ask; none is the answer, not an error
            return Response(204, "No Content", Headers([("Connection", "close")]), b"")
        if path not in self._files:
            return connection.respond(http.HTTPStatus.NOT_FOUND, "Not found\n")
        body, content_type = self._files[path]
        headers = Headers([("Content-Type", content_type), ("Content-Length", str(len(body))),
                           ("Cache-Control", "no-store"), ("Connection", "close")])
        return Response(200, "OK", headers, body)

    def _fan_out(self, frame: _Frame) -> None:
        for client in self._clients.values():
            client.offer(frame)

    def _broadcast_text(self, message: str) -> None:
        for client in self._clients.values():
            asyncio.ensure_future(self._send_text(client, message))

    @staticmethod
    async def _send_text(client: _Client, message: str) -> None:
        try:
            await client.connection.send(message)
        except ConnectionClosed:
            pass

    async def _handle(self, connection: ServerConnection) -> None:
        client = _Client(connection, self._next_client)
        self._next_client += 1
        self._clients[client.id] = client
        tasks = [asyncio.create_task(self._send_frames(client)),
                 asyncio.create_task(self._probe(client))]
        try:
            if self._caption_message is not None:
                await connection.send(self._caption_message)
            async for message in connection:
                self._on_message(client, message)
        except ConnectionClosed:
            pass
        finally:
            del self._clients[client.id]
            for task in tasks:
                task.cancel()

    async def _send_frames(self, client: _Client) -> None:
        try:
            while True:
                await client.wake.wait()
                client.wake.clear()
                # A full window waits for an ack (or the next frame, after
                # ACK_TIMEOUT_S without one); both set wake.
                while client.queue and not client.window_full():
                    frame = client.queue.popleft()
                    client.in_flight.append(frame.seq)
                    await asyncio.wait_for(client.connection.send(frame.message),
                                           self.stall_timeout_s)
                    client.sent += 1
        except ConnectionClosed:
            pass
        except TimeoutError:
            client.connection.transport.abort()

    async def _probe(self, client: _Client) -> None:
        try:
            for n in itertools.count():
                client.probes[n] = time.perf_counter()
                await client.connection.send(probe_message(n))
                # Unanswered probes (clients that never answer) must not pile up.
                client.probes.pop(n - PROBE_BURST, None)
                await asyncio.sleep(PROBE_BURST_GAP_S if n < PROBE_BURST else PROBE_INTERVAL_S)
        except ConnectionClosed:
            pass

    def _on_message(self, client: _Client, message: str | bytes) -> None:
        received = time.perf_counter()
        said = decode_page_message(message)
        if isinstance(said, ProbeAnswer):
            sent = client.probes.pop(said.n, None)
            if sent is None:
                client.ignored += 1
                return
            rtt = received - sent
            if rtt < client.best_rtt_s:
                client.best_rtt_s = rtt
                client.offset_s = said.t_s - (sent + received) / 2
        elif isinstance(said, Painted):
            client.painted += 1
            client.acknowledge(said.seq)
            k = said.seq % PUBLISH_RING
            if client.offset_s is not None and self._publish_seqs[k] == said.seq:
                published = self._publish_times[k] + client.offset_s
                client.delays.append(said.t_s - published)
                if said.ready_s is not None:
                    client.ready_delays.append(said.ready_s - published)
        else:
            client.ignored += 1
