"""Worker threads started ahead of their work.

`threading.Thread.start` holds its caller until the new thread has run, and a new thread
must first get the GIL: beside 2 and 8 threads busy in Python that held the caller 15.6
and 45 ms (P50; P99 40 and 275 ms) on the 2-vCPU VM, where handing a job to a thread
started ahead held it 0.02 ms (bench/thread_start.py, bench/results/
thread_start_2vcpu_xeon.json; the job itself waits for the GIL either way). An API server
that started a thread per stream did so on its event loop, so 50 clients arriving
together reached their handlers one every ~4 ms on a lent H100 host (bench/results/
api50_stamps_h100.json). These threads are started once, when nothing waits on them;
handing one work is a queue put.

Daemon threads: work still running at exit (a stream waiting for text) does not hold
the process, as a ThreadPoolExecutor's threads would.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future


class StartedThreads:
    """`count` daemon threads named `name`-N, started now, each running one job at a time
    in the order given. `submit` returns the job's Future; with every thread busy a job
    waits its turn. `close` cancels the jobs not started and lets the threads end once
    their own job has."""

    def __init__(self, count: int, name: str) -> None:
        if count < 1:
            raise ValueError(f"at least one thread, not {count}")
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._threads = [threading.Thread(target=self._serve, name=f"{name}-{i}", daemon=True)
                         for i in range(count)]
        for thread in self._threads:
            thread.start()

    def submit(self, job: Callable, *args) -> Future:
        if self._closed:
            raise RuntimeError("these threads are closed")
        future: Future = Future()
        self._jobs.put((future, job, args))
        return future

    def close(self) -> None:
        """Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        while True:
            try:
                future, _, _ = self._jobs.get_nowait()
            except queue.Empty:
                break
            future.cancel()
        for _ in self._threads:
            self._jobs.put(None)

    def _serve(self) -> None:
        while (item := self._jobs.get()) is not None:
            future, job, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job(*args))
            except BaseException as exc:  # the caller's to see, through its future
                future.set_exception(exc)
