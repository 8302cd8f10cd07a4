"""The API's speech streams made in processes of their own (the api_speech_processes
setting; 0, the default, makes them in the app's process).

Why: through the API, 50 streams at once are held back by the server's own Python, not by
the voice's engines. On a lent H100, 50 `/stream` clients got their first bytes at P99
316 ms with 219 underruns (bench/results/gpu_h100_66a60f7.json), where the same engines
start 50 streams at P99 71-86 ms (gpu_h100_df05219.json); profiled on the CPU, that time
was every stream's Python taking turns at one GIL, no one function over 5 % of it (issue
25's note, stop 37). A speech process has a GIL and a copy of the voice's engines of its
own, so the streams' Python runs side by side and the server's process only passes their
messages on.

A stream made in a process is what it would be in the app's: the same `Production` with
the same seeded voice, its items sent back in order over the process's pipe. Its cues are
timed beside its first chunk's making as in the app (one cues thread a process) and sent
just before that chunk. Flow: a process sends at most PIPE_ITEMS items of a stream that
the server's loop has not taken (each `next` gives one credit back), so the stream's pipe
in the app never overflows and a client that does not read holds its stream back, as it
does in the app's process.

Each process says when its voice is warm; `on_event` hears once all are (the bench waits
for it before timing), and of a process that ends (killed, crashed): each of its streams
ends with an `unavailable` error and its end, and the next stream starts a process in its
place. Processes ignore Ctrl-C
(a terminal sends it to the whole group: the app stops them itself) and end when the app's
end of their pipe closes, so an app that dies leaves none behind.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Connection

from app.api.protocol import ApiFault
from app.api.speech_stream import PIPE_ITEMS, POLL_S, Finished, Pipe, Production, cues_failed
from pipeline.infer.engine import share_cpu
from pipeline.voice.streaming_tts import StreamingTTS
from pipeline.voice.voice_files import BUNDLED_VOICE, check_voice

log = logging.getLogger(__name__)

# How long close() waits for a process to end once told to (it cancels its streams, whose
# making ends within a chunk's synthesis), before it is killed.
CLOSE_WAIT_S = 3.0
_ENDED = None  # sent after a stream's last item: its making is over
_PROCESS = 0  # the id of what a process says of itself (streams count from 1)


class SpeechProcesses:
    """`count` speech processes for the voice on `provider`, started at once (each loads
    and warms the voice: streams opened meanwhile wait in its pipe). `on_event(text,
    problem)` is told, from a thread of its own, when all are ready, when one could not
    load the voice, and when one ended unasked. Thread-safe."""

    def __init__(self, count: int, provider: str,
                 on_event: Callable[[str, bool], None] = lambda text, problem: None) -> None:
        if count < 1:
            raise ValueError("at least one speech process")
        self.provider = provider
        self.sample_rate = check_voice(BUNDLED_VOICE).sample_rate
        self._on_event = on_event
        self._context = multiprocessing.get_context("spawn")  # fork would copy our threads' locks
        self._lock = threading.Lock()
        self._next_id = 0
        self._started = time.monotonic()
        self._count = count
        self._waiting = count  # processes whose voice is not warm yet
        self._closing = False
        self._workers = [self._worker() for _ in range(count)]

    def _worker(self) -> _Worker:
        return _Worker(self._context, self.provider, self._count, self._said)

    def _said(self, worker: _Worker, what: str, detail) -> None:
        """What a process says of itself, from its reader thread."""
        if what == "ready":
            with self._lock:
                self._waiting -= 1
                last = self._waiting == 0
            if last:
                self._on_event(f"The API's speech is made in {len(self._workers)} processes "
                               f"of their own, each with the voice warm "
                               f"({time.monotonic() - self._started:.1f} s).", False)
        elif what == "failed":
            self._on_event(f"A speech process of the API could not load the voice: {detail}. "
                           "Its streams end with an error (api_speech_processes in the "
                           "settings: 0 makes them in the app).", True)
        elif what == "ended" and not self._closing:
            self._on_event(f"A speech process of the API ended ({detail}): its streams ended "
                           "with an error; the next stream starts another.", True)

    @property
    def count(self) -> int:
        return len(self._workers)

    def open(self, pipe: Pipe, *, seed: int | None, mode: str, length_scale: float,
             ahead_s: float, with_cues: bool) -> _Remote:
        """A stream made in the process with the fewest streams, its items put into
        `pipe`; its text, mode and cancel go through the returned link."""
        with self._lock:
            for i, worker in enumerate(self._workers):
                if not worker.alive:
                    self._workers[i] = self._worker()
            worker = min(self._workers, key=lambda w: len(w.routes))
            self._next_id += 1
            remote = _Remote(worker, self._next_id, pipe, self.sample_rate)
        if worker.add(remote):
            worker.send(("open", remote.sid, seed, mode, length_scale, ahead_s, with_cues))
        else:  # it ended since it was picked
            remote.lost(worker.why)
        return remote

    def close(self) -> None:
        """Every process told to end, then waited for (killed past CLOSE_WAIT_S)."""
        with self._lock:
            self._closing = True
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.send(("quit", 0))
        deadline = time.monotonic() + CLOSE_WAIT_S
        for worker in workers:
            worker.stop(max(0.0, deadline - time.monotonic()))


class _Worker:
    """One speech process, and the thread here that reads what it sends."""

    def __init__(self, context, provider: str, count: int,
                 said: Callable[[_Worker, str, object], None]) -> None:
        self._said = said
        here, there = context.Pipe()
        self.process = context.Process(target=serve, args=(there, provider, count),
                                       name="lipsync-speech", daemon=True)
        self.process.start()
        there.close()
        self._conn = here
        self._send_lock = threading.Lock()
        self.routes: dict[int, _Remote] = {}  # its streams not yet ended, by id
        self._routes_lock = threading.Lock()  # a stream added as the process ends is lost
        self.alive = True
        self.why = "it ended"
        self._reader = threading.Thread(target=self._read, name="speech-process-reader",
                                        daemon=True)
        self._reader.start()

    def add(self, remote: _Remote) -> bool:
        """Route `remote`'s items here; False once the process has ended."""
        with self._routes_lock:
            if self.alive:
                self.routes[remote.sid] = remote
            return self.alive

    def send(self, message: tuple) -> None:
        with self._send_lock:
            try:
                self._conn.send(message)
            except (OSError, ValueError):
                pass  # the process is gone: its reader ends its streams

    def _read(self) -> None:
        try:
            while True:
                sid, item = self._conn.recv()
                if sid == _PROCESS:
                    self._said(self, *item)
                    continue
                remote = self.routes.get(sid)
                if remote is not None:
                    remote.arrived(item)
        except (EOFError, OSError):
            pass
        with self._routes_lock:  # first: no stream is opened here from now on
            self.alive = False
            lost = list(self.routes.values())
            self.routes.clear()
        self.process.join(CLOSE_WAIT_S)
        self.why = f"exit status {self.process.exitcode}"
        for remote in lost:
            remote.lost(self.why)
        self._said(self, "ended", self.why)

    def stop(self, wait_s: float) -> None:
        self.process.join(wait_s)
        if self.process.is_alive():
            log.warning("A speech process did not end in %.0f s: killed.", CLOSE_WAIT_S)
            self.process.kill()
            self.process.join(1.0)
        self._reader.join(1.0)
        self._conn.close()


class _Remote:
    """The app's end of one stream made in a speech process (SpeechStream's link)."""

    def __init__(self, worker: _Worker, sid: int, pipe: Pipe, sample_rate: int) -> None:
        self._worker = worker
        self.sid = sid
        self._pipe = pipe
        self._sample_rate = sample_rate
        self._ended = threading.Event()
        self._samples = 0
        self._done = False  # its end was put, or it was cancelled: nothing more for a reader

    def text(self, text: str | None) -> None:
        self._worker.send(("text", self.sid, text))

    def mode(self, mode: str) -> None:
        self._worker.send(("mode", self.sid, mode))

    def cancel(self) -> None:
        if not self._done:
            self._done = True
            self._worker.send(("cancel", self.sid))

    def taken(self) -> None:
        self._worker.send(("taken", self.sid))

    def join(self, timeout: float | None) -> bool:
        return self._ended.wait(timeout)

    def arrived(self, item) -> None:
        """From the reader thread, in the order the process sent them."""
        if item is _ENDED:
            self._worker.routes.pop(self.sid, None)
            self._ended.set()
            return
        if isinstance(item, bytes):
            self._samples += len(item) // 2
        elif isinstance(item, Finished):
            self._done = True
        self._pipe.put_now(item)

    def lost(self, why: str) -> None:
        if not self._done:
            self._done = True
            self._pipe.put_now(ApiFault("unavailable", f"The speech process making this "
                                        f"stream stopped ({why}): its audio ends here."))
            self._pipe.put_now(Finished(self._samples, self._sample_rate))
        self._ended.set()


# -- in the speech process --------------------------------------------------------------

def serve(conn: Connection, provider: str, processes: int) -> None:
    """A speech process's life, one of `processes`: the voice loaded and warmed, then each
    message from the app carried out, until the app says quit or its end of the pipe
    closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    share_cpu(processes)
    logging.basicConfig(level=logging.WARNING,
                        format="speech process: %(levelname)s %(name)s: %(message)s")
    send_lock = threading.Lock()

    def send(sid: int, item) -> None:
        with send_lock:
            try:
                conn.send((sid, item))
            except (OSError, ValueError):
                pass  # the app has gone, or told this process to end: nobody reads

    streams: dict[int, _Made] = {}
    failure = None
    try:
        voice = StreamingTTS(provider=provider)  # the engines, shared by every stream
        voice.warm_up()
        voice.close()
        send(_PROCESS, ("ready", None))
    except Exception as exc:  # noqa: BLE001 - the app is told, and each stream
        log.exception("the voice did not load")
        failure = exc
        send(_PROCESS, ("failed", str(exc)))
    cues_worker = ThreadPoolExecutor(1, thread_name_prefix="api-cues")
    cues_worker.submit(lambda: None)  # its thread now, not within a first stream
    try:
        while True:
            try:
                kind, sid, *rest = conn.recv()
            except EOFError:
                break
            if kind == "quit":
                break
            if kind == "open":
                made = _Made.start(sid, rest, provider, failure, cues_worker, send,
                                   lambda sid=sid: streams.pop(sid, None))
                if made is not None:
                    streams[sid] = made
                continue
            made = streams.get(sid)
            if made is not None:
                made.message(kind, rest)
    finally:
        for made in list(streams.values()):
            made.production.cancel()
        cues_worker.shutdown(wait=False, cancel_futures=True)
        conn.close()


class _Made:
    """One stream's making in a speech process: its Production on a thread of its own,
    sending with the credits the app gives back."""

    def __init__(self, sid: int, production: Production, send, ended) -> None:
        self.sid = sid
        self.production = production
        self._send = send
        self._ended = ended
        self._credits = threading.Semaphore(PIPE_ITEMS)
        self._pending: Future | None = None

    @classmethod
    def start(cls, sid: int, options: list, provider: str, failure: Exception | None,
              cues_worker, send, ended) -> _Made | None:
        seed, mode, length_scale, ahead_s, with_cues = options
        try:
            if failure is not None:
                raise failure
            tts = StreamingTTS(seed=seed, provider=provider)
        except Exception as exc:  # noqa: BLE001 - the client is told, and its stream ends
            send(sid, ApiFault("unavailable", f"Speech failed: {exc}"))
            send(sid, Finished(0, check_voice(BUNDLED_VOICE).sample_rate))
            send(sid, _ENDED)
            return None
        made = cls(sid, Production(tts, mode, length_scale, ahead_s, time.monotonic,
                                   cues_worker, with_cues), send, ended)
        threading.Thread(target=made._run, name="api-stream", daemon=True).start()
        return made

    def message(self, kind: str, rest: list) -> None:
        if kind == "text":
            self.production.texts.put(rest[0])
        elif kind == "mode":
            self.production.mode = rest[0]
        elif kind == "cancel":
            self.production.cancel()
        elif kind == "taken":
            self._credits.release()

    def _run(self) -> None:
        try:
            self.production.run(self._put)
        finally:
            self._ended()
            self._send(self.sid, _ENDED)

    def _put(self, item) -> bool:
        if isinstance(item, Future):
            # Sent before the next item, so its timing overlaps that chunk's making.
            self._pending = item
            return True
        if self._pending is not None:
            pending, self._pending = self._pending, None
            try:
                cues = pending.result()
            except Exception as exc:  # noqa: BLE001 - the stream goes on without these cues
                cues = cues_failed(exc)
            if not self._put_one(cues):
                return False
        return self._put_one(item)

    def _put_one(self, item) -> bool:
        cancelled = self.production.cancelled
        while not cancelled.is_set():
            if self._credits.acquire(timeout=POLL_S):
                self._send(self.sid, item)
                return True
        return False
