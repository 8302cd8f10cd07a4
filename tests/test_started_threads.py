"""Threads started ahead of their work: jobs run on them, in order, with their results
and errors in their futures; closing cancels what has not started."""

from __future__ import annotations

import threading

import pytest

from pipeline.core.started_threads import StartedThreads


def test_the_threads_run_before_any_work_and_jobs_come_back_through_futures():
    before = threading.active_count()
    threads = StartedThreads(3, "test-worker")
    try:
        assert threading.active_count() == before + 3  # started now, not at the first job
        names = [threads.submit(lambda: threading.current_thread().name).result(5) for _ in range(3)]
        assert all(name.startswith("test-worker-") for name in names)
        assert threads.submit(lambda a, b: a + b, 2, 3).result(5) == 5
        failed = threads.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            failed.result(5)
        # Three jobs that hold all three threads, then one that must wait its turn.
        release = threading.Event()
        held = [threads.submit(release.wait, 5) for _ in range(3)]
        waiting = threads.submit(lambda: "ran")
        assert not waiting.done()
        release.set()
        assert waiting.result(5) == "ran" and all(f.result(5) for f in held)
    finally:
        threads.close()


def test_closing_cancels_jobs_not_started_and_the_threads_end():
    threads = StartedThreads(1, "test-closing")
    started, release = threading.Event(), threading.Event()
    running = threads.submit(lambda: (started.set(), release.wait(5))[1])
    queued = threads.submit(lambda: "never")
    assert started.wait(5)
    threads.close()
    threads.close()  # twice is fine
    assert queued.cancelled()
    release.set()
    assert running.result(5) is True
    for thread in threads._threads:
        thread.join(5)
        assert not thread.is_alive()
    with pytest.raises(RuntimeError):
        threads.submit(lambda: None)
