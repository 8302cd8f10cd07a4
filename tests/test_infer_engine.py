"""pipeline/infer/engine.py's device queue scheduling, on the CPU: earliest deadline
first, runs of one engine and key batched, one run at a time, errors to their callers, and
no waiting thread left behind; the device's lane making every run on one thread; and which host inputs a device engine uploads again. The stage it schedules is a stand-in whose runs take a known
time (the GPU runs themselves are tested on the H200: tests/test_gpu_voice.py)."""

import threading
import time

import numpy as np
import pytest

from pipeline.infer.engine import (
    CONCURRENT_BATCH_SIZES,
    _DeviceLane,
    _DeviceQueue,
    batch_count,
    batch_sizes_for,
)
from tests.harness.waiting import until

# How long a flow batch of each size took a lent H100's device lane, in seconds
# (bench/results/gpu_h100_df05219.json's streams50 trace).
H100_FLOW_S = {1: 0.0013, 8: 0.0030, 64: 0.0200}


class Stage:
    """What the queue asks of an engine: batch_count(feed, waiting) and
    _execute(requests). With `run_s` (seconds a run of each batch size) it counts as a
    device engine does; without, as many as the largest size holds."""

    def __init__(self, batch_sizes=(1, 8), seconds=0.002, fail=False, run_s=None, hold=None):
        self.batch_sizes = batch_sizes
        self.run_s = run_s
        self.hold = hold  # an Event the first run waits for, where the test needs it
        self.seconds = seconds
        self.fail = fail
        self.batches: list[list[float]] = []
        self.running = 0
        self.overlapped = False
        self.threads: set[int] = set()

    def batch_count(self, feed, waiting):
        if self.run_s is not None:
            return batch_count(waiting, self.run_s)
        return min(waiting, max(self.batch_sizes))

    def _execute(self, requests):
        self.threads.add(threading.get_ident())
        self.running += 1
        self.overlapped |= self.running > 1
        self.most_at_once = max(getattr(self, "most_at_once", 0), self.running)
        if self.hold is not None and not self.batches:
            self.hold.wait(10)
        time.sleep(self.seconds)
        self.batches.append([r.deadline for r in requests])
        self.running -= 1
        if self.fail:
            raise RuntimeError("device fell over")
        for r in requests:
            r.outputs = [r.feed["x"]]


def _many(queue, stage, deadlines, key=lambda i: ("k",)):
    results = [None] * len(deadlines)
    start = threading.Barrier(len(deadlines))

    def one(i):
        start.wait()
        results[i] = queue.run(stage, key(i), {"x": i}, deadlines[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(deadlines))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(thread.is_alive() for thread in threads)
    return results


# The device's queue (_DeviceLane) schedules as the callers' queue does, every run on one
# thread of its own: onnxruntime keeps a captured CUDA graph per thread, so runs from the
# callers' threads would each capture again (pipeline/infer/engine.py).
ONE_LANE = [pytest.param(_DeviceQueue, id="callers' threads"), pytest.param(_DeviceLane, id="device lane")]


@pytest.mark.parametrize("kind", ONE_LANE)
def test_fifty_callers_each_get_their_own_output_batched_one_run_at_a_time(kind):
    stage = Stage(batch_sizes=(1, 8, 64))
    results = _many(kind(), stage, [float(i) for i in range(50)])
    assert results == [[i] for i in range(50)]
    assert not stage.overlapped
    # While one run takes 2 ms the others queue up: far fewer runs than callers.
    assert len(stage.batches) < 25
    assert sum(len(b) for b in stage.batches) == 50
    if kind is _DeviceLane:
        assert len(stage.threads) == 1 and threading.get_ident() not in stage.threads


@pytest.mark.parametrize("kind", ONE_LANE)
def test_batches_never_exceed_the_largest_size_and_keys_are_not_mixed(kind):
    stage = Stage(batch_sizes=(1, 4))
    results = _many(kind(), stage, [0.0] * 40, key=lambda i: (i % 2,))
    assert results == [[i] for i in range(40)]
    assert max(len(b) for b in stage.batches) <= 4


@pytest.mark.parametrize("kind", ONE_LANE)
def test_the_most_urgent_waiting_request_runs_next(kind):
    stage = Stage(batch_sizes=(1,), seconds=0.05)
    queue = kind()
    order = []
    first = threading.Thread(target=lambda: queue.run(stage, ("a",), {"x": 0}, 0.0))
    first.start()
    time.sleep(0.005)  # the first run is under way; these three wait behind it
    late = [threading.Thread(target=lambda d=d: order.append(queue.run(stage, ("a",), {"x": d}, d)))
            for d in (3.0, 1.0, 2.0)]
    for thread in late:
        thread.start()
        time.sleep(0.002)
    for thread in [first, *late]:
        thread.join(timeout=5)
    assert [b[0] for b in stage.batches] == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("kind", ONE_LANE)
def test_an_error_reaches_every_caller_of_its_batch_and_the_queue_goes_on(kind):
    queue = kind()
    broken = Stage(fail=True)
    with pytest.raises(RuntimeError, match="fell over"):
        queue.run(broken, ("k",), {"x": 1}, 0.0)
    with pytest.raises(ValueError, match="warm-up failed"):
        queue.exclusive(lambda: (_ for _ in ()).throw(ValueError("warm-up failed")))
    assert queue.run(Stage(), ("k",), {"x": 2}, 0.0) == [2]


@pytest.mark.parametrize("kind", ONE_LANE)
def test_exclusive_work_waits_for_the_run_under_way(kind):
    stage = Stage(seconds=0.05)
    queue = kind()
    worker = threading.Thread(target=lambda: queue.run(stage, ("k",), {"x": 0}, 0.0))
    worker.start()
    time.sleep(0.01)
    seen = []
    queue.exclusive(lambda: seen.append((stage.running, threading.get_ident())))
    worker.join()
    assert [running for running, _ in seen] == [0]
    if kind is _DeviceLane:  # warm-up captures are made on the thread that replays them
        assert {thread for _, thread in seen} == stage.threads


@pytest.mark.parametrize("kind", ONE_LANE)
def test_requests_waiting_are_batched_by_the_sizes_run_times_most_urgent_first(kind):
    hold = threading.Event()
    stage = Stage(batch_sizes=(1, 8, 64), run_s=H100_FLOW_S, hold=hold)
    queue = kind()
    first = threading.Thread(target=lambda: queue.run(stage, ("a",), {"x": -1}, -1.0))
    first.start()
    until(lambda: stage.running == 1, 10, "the first run", poll=0.001)
    late = [threading.Thread(target=lambda d=d: queue.run(stage, ("a",), {"x": d}, d))
            for d in (10.0, 3.0, 7.0, 0.0, 5.0, 9.0, 1.0, 8.0, 2.0, 6.0, 4.0)]
    for thread in late:
        thread.start()
    until(lambda: len(queue._heap) == 11, 10, "eleven requests waiting behind it", poll=0.001)
    hold.set()
    for thread in [first, *late]:
        thread.join(timeout=5)
    # Eleven padded to 64 would cost 20 ms; the eight most urgent (3.0 ms) and then
    # the other three (3.0 ms) serve them sooner.
    assert [sorted(b) for b in stage.batches] == [[-1.0], [float(d) for d in range(8)],
                                                  [8.0, 9.0, 10.0]]


def test_a_batch_is_the_size_that_serves_the_most_requests_a_second():
    assert batch_count(1, H100_FLOW_S) == 1
    assert batch_count(5, H100_FLOW_S) == 5  # 5 in 3.0 ms against 1 in 1.3
    assert batch_count(11, H100_FLOW_S) == 8  # 8 in 3.0 ms against 11 in 20
    assert batch_count(50, H100_FLOW_S) == 8  # 8 in 3.0 ms against 50 in 20
    assert batch_count(60, H100_FLOW_S) == 60  # 60 in 20 ms against 8 in 3.0
    assert batch_count(200, H100_FLOW_S) == 64
    # A tie runs more: 16 in 2 s against 8 in 1 s.
    assert batch_count(20, {1: 1.0, 8: 1.0, 16: 2.0}) == 16


def test_two_lanes_run_two_batches_at_once_and_never_more():
    stage = Stage(batch_sizes=(1, 4), seconds=0.01)
    queue = _DeviceQueue(lanes=2)
    results = _many(queue, stage, [float(i) for i in range(40)], key=lambda i: (i % 3,))
    assert results == [[i] for i in range(40)]
    assert stage.most_at_once == 2 and max(len(b) for b in stage.batches) <= 4
    assert sum(len(b) for b in stage.batches) == 40


def test_exclusive_work_holds_every_lane():
    stage = Stage(seconds=0.05)
    queue = _DeviceQueue(lanes=2)
    workers = [threading.Thread(target=lambda k=k: queue.run(stage, (k,), {"x": 0}, 0.0))
               for k in "ab"]
    for worker in workers:
        worker.start()
    time.sleep(0.01)
    seen = []
    queue.exclusive(lambda: seen.append(stage.running))
    after = queue.run(stage, ("c",), {"x": 5}, 0.0)
    for worker in workers:
        worker.join()
    assert seen == [0] and after == [5]



def test_batch_sizes_are_the_fewest_that_hold_the_streams():
    assert batch_sizes_for(1) == (1,)
    assert batch_sizes_for(2) == batch_sizes_for(8) == (1, 8)
    # Past the largest size a batch is split, so no size is added for more streams.
    assert batch_sizes_for(9) == batch_sizes_for(1024) == CONCURRENT_BATCH_SIZES == (1, 8, 64)


def test_a_small_input_equal_to_what_its_buffer_holds_is_not_uploaded_and_a_large_one_is():
    from pipeline.infer.engine import _HELD_BYTES, _upload_needed

    held = {}
    mask = np.ones((64, 1, 128), np.float32)  # the flow's mask at the largest batch
    assert _upload_needed(held, "mask", mask)
    mask[0, 0, 0] = 0.0  # the caller's array changed after it went up: the copy did not
    assert _upload_needed(held, "mask", mask)
    assert not _upload_needed(held, "mask", mask.copy())
    assert _upload_needed(held, "mask", np.zeros_like(mask))
    prior = np.zeros((1, 192, 128), np.float32)  # the flow's prior: 98 KB
    assert prior.nbytes > _HELD_BYTES >= mask.nbytes
    assert _upload_needed(held, "prior", prior) and _upload_needed(held, "prior", prior)
    assert "prior" not in held
