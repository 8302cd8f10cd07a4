"""A model stage run on a handful of fixed input shapes, on whatever the machine has.

On the CPU an engine is one onnxruntime session for every shape. On a GPU (CUDA or
TensorRT provider) it is one session per input shape and batch size, built on first
use (warm-up builds every one): the graph's shapes pinned and its masked indexing made
dense (pipeline/infer/static_graph.py), so every node runs on the device; its inputs
and outputs bound once to device buffers (I/O binding), so a run copies just its inputs
up and its outputs down (or neither: an input may come from, and the outputs stay in,
device memory, pipeline/infer/device_memory.py); and the whole run captured as a CUDA
graph when it is built and replayed after, one launch instead of one per node.

Runs of every engine in the process go through one queue per kind (_DeviceLane: one
thread of its own on the device; _DeviceQueue: a lane per core on the CPU), earliest
deadline first: a run asked for with the deadline of the audio it makes, so a stream's
first chunk is not stuck behind another stream's chunks that are seconds ahead of their
playback. Runs of one engine and key waiting together go as one batch (on the device
padded to one of `batch_sizes`, as many as serve the most requests a second by each
size's measured run time; on the CPU up to CPU_BATCH), so 50 streams starting at once
cost a few runs, not 50 times each.

Where a shape's graph still has a node the device cannot run, that shape runs without
a CUDA graph, with onnxruntime's copies around the node: `notes` says which shape and
why (never silently).

`transfers` counts the host↔device copies the engine makes (not those within the
device), and `device_copies` the copy nodes onnxruntime put inside each graph (0 when
the graph is captured: capture refuses a graph with any CPU node). Engines are
thread-safe.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime

from pipeline.infer import device_memory
from pipeline.infer.device_memory import DeviceColumns
from pipeline.infer.sessions import build_session, choose_provider, static_session
from pipeline.infer.static_graph import (
    compact_splines,
    dense_masked_indexing,
    fixed_shapes,
    fused_layer_norms,
    half_precision,
)

log = logging.getLogger(__name__)

_state = onnxruntime.capi.onnxruntime_pybind11_state
# What onnxruntime raises for a graph it cannot place on the device or capture.
_OrtError = (_state.Fail, _state.InvalidArgument, _state.RuntimeException, _state.EPFail,
             _state.NotImplemented, _state.InvalidGraph)
_DTYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64}

# onnxruntime's CUDA provider captures a session's graph at its second run (after one
# regular run that makes its allocations); the third replays it. All three happen when
# the session is built, on the device's thread (_DeviceLane), so no capture is ever under
# way while a stream runs.
_RUNS_TO_CAPTURE = 3
# Runs timed after those, for the batch sizes' run times (batch_count): the median of
# three, so one run slowed by something else on the machine does not set it.
_TIMED_RUNS = 3

Shapes = tuple[tuple[str, tuple[int, ...]], ...]
# What takes a run's outputs where they are made (Engine.run's `keep`).
Keep = Callable[[list], None]


@dataclass(slots=True)
class Transfers:
    """Host↔device copies made by an engine's runs (each input up, each output down)."""

    runs: int = 0
    uploads: int = 0
    downloads: int = 0
    batched: int = 0  # requests served by those runs


@dataclass(slots=True)
class _Bound:
    """One shape's session at one batch size, with its device buffers bound."""

    session: onnxruntime.InferenceSession
    binding: onnxruntime.IOBinding
    inputs: dict[str, onnxruntime.OrtValue]
    outputs: list[onnxruntime.OrtValue]
    # What small host inputs' buffers hold (_upload_needed).
    held: dict[str, np.ndarray]
    graph: bool  # whether runs replay a captured CUDA graph
    copies: int | None  # copy nodes onnxruntime put in its graph (None: not known)
    run_s: float  # a run's time with its outputs' download, measured when it was built


@dataclass(order=True, slots=True)
class _Request:
    deadline: float
    order: int
    engine: Engine = field(compare=False)
    key: tuple = field(compare=False)  # shapes, and the values of unbatched inputs
    feed: dict[str, np.ndarray | DeviceColumns] = field(compare=False)
    # Given the outputs on the device, on the device's thread, instead of their download.
    keep: Keep | None = field(default=None, compare=False)
    outputs: list[np.ndarray] | None = field(default=None, compare=False)
    error: BaseException | None = field(default=None, compare=False)
    done: bool = field(default=False, compare=False)
    wake: threading.Event = field(default_factory=threading.Event, compare=False)


class _DeviceQueue:
    """Every run of the engines of one kind (the device's, or the CPU's), at most `lanes`
    at a time, earliest deadline first, each made by a thread that asked for one (no
    hand-off to a thread of its own: that would cost each run a thread switch).

    A thread holding a lane (a leader) runs batches, most urgent first, until its own
    request is done (another leader may have run it), then gives the lane to the owner
    of the most urgent request left, waking that one thread; the owners of the requests
    it ran are woken one by one as theirs finish. So a finished batch wakes its own
    requests' threads and at most one more, never every waiting stream (with 50
    streams, waking all of them at every batch cost more than the runs). A leader that
    finds nothing left to run gives its lane back and waits for its own request.

    The device has one lane, because a CUDA graph capture records every CUDA call the
    process makes meanwhile: a copy made by another thread then breaks it (measured on
    the H200: "operation failed due to a previous error during capture", from a
    stream's prefetch thread). One GPU runs these small graphs one after another anyway.
    The CPU has a lane per core: each session runs on one intra-op thread.
    """

    def __init__(self, lanes: int = 1) -> None:
        self.lanes = lanes
        # Set to a list to record every batch run: (start, end perf_counter seconds,
        # engine, batch size, requests, first input's shape), for bench/gpu.py to see
        # where many streams' time goes. None (the app): nothing recorded.
        self.trace: list[tuple[float, float, str, int, int, tuple[int, ...]]] | None = None
        self._heap: list[_Request] = []
        self._lock = threading.Lock()
        self._leaders = 0
        self._order = itertools.count()

    def run(self, engine: Engine, key: tuple, feed: dict[str, np.ndarray],
            deadline: float) -> list[np.ndarray]:
        request = _Request(deadline, next(self._order), engine, key, feed)
        with self._lock:
            heapq.heappush(self._heap, request)
            lead = self._take_lane()
        while not request.done:
            if lead:
                with self._lock:
                    batch = self._take() if self._heap else None
                    if batch is None:
                        lead = False  # its own request is being run by another leader
                        self._leaders -= 1
                if batch is not None:
                    self._execute(batch)
                    for waiting in batch:
                        if waiting is not request:
                            waiting.wake.set()
                continue
            # Woken when the request is done, or else to take a lane.
            request.wake.wait()
            request.wake.clear()
            if not request.done:
                with self._lock:
                    lead = self._take_lane()
        if lead:
            self._hand_over()
        if request.error is not None:
            raise request.error
        return request.outputs

    def _take_lane(self) -> bool:
        """A free lane, taken (the caller holds the lock)."""
        if self._leaders < self.lanes:
            self._leaders += 1
            return True
        return False

    def exclusive(self, work) -> None:
        """Call `work()` holding every lane, once no run is under way (warm-up)."""
        while True:
            with self._lock:
                if not self._leaders:
                    self._leaders = self.lanes
                    break
            time.sleep(0.001)
        try:
            work()
        finally:
            with self._lock:
                self._leaders = 1
            self._hand_over()

    def _execute(self, batch: list[_Request]) -> None:
        engine = batch[0].engine
        start = time.perf_counter()
        try:
            engine._execute(batch)
        except BaseException as exc:  # noqa: BLE001 - handed to each waiting caller
            for waiting in batch:
                waiting.error = exc
        if self.trace is not None:
            first = batch[0].feed[engine.input_names[0]].shape
            size = next((s for s in engine.batch_sizes if s >= len(batch)), len(batch))
            self.trace.append((start, time.perf_counter(), engine.name, size, len(batch), first))
        for waiting in batch:
            waiting.done = True

    def _hand_over(self) -> None:
        """Give the lane to the owner of the most urgent request, or free it."""
        with self._lock:
            self._leaders -= 1
            if self._heap:
                self._heap[0].wake.set()

    def _take(self) -> list[_Request]:
        """The most urgent request and those of its engine and key behind it, as many
        as the engine says to run together of those waiting."""
        first = heapq.heappop(self._heap)
        same = [r for r in self._heap if r.engine is first.engine and r.key == first.key]
        same = sorted(same)[:first.engine.batch_count(first.feed, 1 + len(same)) - 1]
        if same:
            taken = {id(r) for r in same}
            self._heap = [r for r in self._heap if id(r) not in taken]
            heapq.heapify(self._heap)
        return [first, *same]


@dataclass(slots=True)
class _Call:
    """Work to be done on the device's thread between runs (an engine's warm-up), queued
    in an engine's place: a batch of one."""

    work: Callable[[], None]

    def batch_count(self, feed: dict[str, np.ndarray], waiting: int) -> int:
        return 1


class _DeviceLane(_DeviceQueue):
    """The device's runs, every one made by a thread of its own, earliest deadline first,
    batched as _DeviceQueue batches them; a caller hands its request over and waits.

    Why not the callers' threads, as on the CPU: onnxruntime's CUDA provider keeps a
    session's captured CUDA graph, and its cuBLAS and cuDNN handles, per thread
    (PerThreadContext, "cuda_graph_ is put under PerThreadContext" in its
    cuda_execution_provider.h), and with graphs on it never releases a thread's
    context. A session captured on one thread replays nothing on another: there it
    makes new handles, runs twice without its graph and captures it again, mid-stream;
    and every thread that ever ran it keeps a context for the life of the process. On a
    lent H100, with runs on the callers' threads, first audio took 63.7 ms (P50) on a
    fresh thread against 7.9 ms on the thread that warmed the engines up
    (bench/results/gpu_h100_callers_threads.json); on this lane, 6.9 against 7.1 ms
    (bench/results/gpu_h100.json, first_audio_by_thread). One thread
    also keeps captures away from runs on other threads, which break them (see
    _DeviceQueue). The hand-over costs two thread switches a run (tens of µs)."""

    def __init__(self) -> None:
        super().__init__(lanes=1)
        self._work = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None

    def run(self, engine: Engine, key: tuple, feed: dict[str, np.ndarray | DeviceColumns],
            deadline: float, keep: Keep | None = None) -> list[np.ndarray] | None:
        return self._submit(_Request(deadline, next(self._order), engine, key, feed, keep))

    def exclusive(self, work) -> None:
        """Call `work()` on the device's thread, before any run still waiting."""
        self._submit(_Request(float("-inf"), next(self._order), _Call(work), (), {}))

    def _submit(self, request: _Request) -> list[np.ndarray] | None:
        """Queue `request`, wait until the device's thread has run it, and give its
        outputs (what it raised, raised here)."""
        with self._work:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="device runs", daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, request)
            self._work.notify()
        request.wake.wait()
        if request.error is not None:
            raise request.error
        return request.outputs

    def _serve(self) -> None:
        while True:
            with self._work:
                while not self._heap:
                    self._work.wait()
                batch = self._take()
            if isinstance(batch[0].engine, _Call):
                try:
                    batch[0].engine.work()
                except BaseException as exc:  # noqa: BLE001 - handed to its caller
                    batch[0].error = exc
                batch[0].done = True
            else:
                self._execute(batch)
            for request in batch:
                request.wake.set()


_QUEUE = _DeviceLane()
# CPU runs: a lane per core, earliest deadline first, one request a run. Batching on the
# CPU was measured and lost (50 streams starting at once on the 2-core development VM,
# bench-like text, balanced mode): unbatched, first audio P50 444 / P99 775 ms, 14.0 s in
# all, +60 MB; batches padded to 4, 394 / 596 ms but +205 MB (onnxruntime's CPU arenas
# keep the largest of every shape and batch they have run; measured when each session had
# its own, before sessions.py's shared one); batches of any size up to 8,
# twice as slow in all (20 s) and +355 MB. Without the queue (each stream's thread running
# its own sessions, as before it) the first audio was 932 / 1606 ms.
CPU_BATCH = 1
_CPU_QUEUE = _DeviceQueue(lanes=os.cpu_count() or 1)


# Inputs up to this size are compared with what their buffer holds before they go up.
# The ones that repeat are small: the voice's scales (every acoustic run) and the flow's
# mask (every full window; 32 KB at a batch of 64). The large ones, the flow's priors,
# carry noise and never repeat, so comparing them and keeping a copy is work for
# nothing on the device's thread: 7.8 us at a batch of one (98 KB) and 0.97 ms at 64
# (6.3 MB) on the 2-vCPU VM; and a copy kept per graph (the priors of 15 flow graphs at
# the API's batch sizes: tens of MB of host memory, from their shapes).
_HELD_BYTES = 64 * 1024


def _upload_needed(held: dict[str, np.ndarray], name: str, array: np.ndarray) -> bool:
    """Whether `array` must go up to input `name`'s buffer, which holds `held[name]`
    where that is known; `held` updated for the upload."""
    if array.nbytes > _HELD_BYTES:
        held.pop(name, None)
        return True
    if name in held and np.array_equal(array, held[name]):
        return False
    held[name] = array.copy()
    return True


def _row_bytes(shape: Sequence[int]) -> int:
    """Bytes of one batch row of a float32 buffer of `shape`."""
    return int(np.prod(shape[1:])) * np.dtype(np.float32).itemsize


def _row_columns(value: onnxruntime.OrtValue, row: int) -> DeviceColumns:
    """Batch row `row` of the float32 device buffer `value`: its trailing axis as
    columns, every other axis as rows."""
    shape = value.shape()
    rows = int(np.prod(shape[1:-1]))
    return DeviceColumns(value.data_ptr() + row * _row_bytes(shape), rows, shape[-1], 0,
                         shape[-1], shape[-1])


def _batched(value: np.ndarray) -> bool:
    """Whether an input is batched along its first dimension (of size 1 in a request);
    any other input must be equal across a batch."""
    return value.shape[:1] == (1,)


# What an engine may compute in on a device (Engine's `precision`).
PRECISIONS = ("fp32", "tf32", "fp16")

# The batch sizes a device runs concurrent streams' requests in, a CUDA graph each per
# shape. 50 API clients at once on a lent H100 (bench/results/api50_batches_h100.json,
# alternated in one warm machine): (1, 8, 64) first byte P99 148-199 ms and 7-37
# underruns; (1,) 269-274 ms and 188-191; (1, 4, 16, 64), (1, 16, 64), (1, 64) and
# (1, 8, 32, 64) 189-222 ms and 18-34. Each size adds one graph per shape to the warm-up
# (78 graphs in 27.5 s against 26 in 7.7 s, bench/results/gpu_h100_df05219.json).
CONCURRENT_BATCH_SIZES = (1, 8, 64)


def batch_count(waiting: int, run_s: dict[int, float]) -> int:
    """How many of `waiting` requests (of one engine and key) to run as one batch, given
    the run time of each batch size (a batch is padded up to a size): the most requests
    a second of device time, the more requests on a tie.

    Padding is what this saves: in a trace of 50 streams on a lent H100, a flow batch
    padded to 64 took the lane 20.0 ms and one of 8 took 3.0 ms (bench/results/
    gpu_h100_df05219.json's streams50), so 11 waiting went as one run at the price of 64.
    The requests left wait for the next batch, most urgent first."""
    def rate(size: int) -> tuple[float, int]:
        served = min(waiting, size)
        return served / run_s[size], served

    return min(waiting, max(run_s, key=rate))


def batch_sizes_for(streams: int) -> tuple[int, ...]:
    """The batch sizes for up to `streams` concurrent streams: CONCURRENT_BATCH_SIZES
    up to the first that holds them all (a batch past that is split), only (1,) for one."""
    sizes = [1]
    for size in CONCURRENT_BATCH_SIZES[1:]:
        if sizes[-1] >= streams:
            break
        sizes.append(size)
    return tuple(sizes)


# The graph rewrites an Engine makes unless told otherwise, in the order it makes them.
REWRITES = ("compact_splines", "fused_layer_norms")


def cpu_graph(model: onnx.ModelProto, rewrites: Collection[str] = REWRITES) -> onnx.ModelProto:
    """`model` with `rewrites` (of REWRITES) made: the graph an Engine runs on the CPU."""
    return _fused(_compacted(model, rewrites), rewrites)


def _compacted(model: onnx.ModelProto, rewrites: Collection[str]) -> onnx.ModelProto:
    return compact_splines(model) if "compact_splines" in rewrites else model


def _fused(model: onnx.ModelProto, rewrites: Collection[str]) -> onnx.ModelProto:
    return fused_layer_norms(model) if "fused_layer_norms" in rewrites else model


class Engine:
    """`model` (an onnx graph whose inputs may have symbolic sizes) on `provider` (one
    of pipeline.infer.sessions.PROVIDERS) with `threads` intra-op CPU threads.

    On a device, inputs whose first dimension is 1 are batched along it, up to the
    largest of `batch_sizes` (each a graph of its own); requests are batched only when
    their other inputs are equal. `precision` is what a device computes in: "fp32";
    "tf32", its convolutions and matrix products rounding their inputs to TF32
    (pipeline/infer/sessions.py says when not); or "fp16" (static_graph.half_precision).
    The CPU computes in fp32 whatever is asked. `rewrites` (of REWRITES) are made on the
    CPU as on a device: "compact_splines" (static_graph.compact_splines) gives the same
    numbers with fewer nodes; "fused_layer_norms" the same sums in another order, within
    the kernels' rounding of the graph as given."""

    def __init__(self, name: str, model: onnx.ModelProto, provider: str, threads: int = 1,
                 batch_sizes: Sequence[int] = (1,), precision: str = "fp32",
                 rewrites: Collection[str] = REWRITES):
        if not batch_sizes or min(batch_sizes) != 1:
            raise ValueError(f"batch sizes must include 1, got {tuple(batch_sizes)}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if unknown := set(rewrites) - set(REWRITES):
            raise ValueError(f"rewrites must be of {REWRITES}, got {sorted(unknown)}")
        self.name = name
        self.rewrites = tuple(r for r in REWRITES if r in rewrites)
        self._threads = threads
        self.precision = precision
        self.batch_sizes = tuple(sorted(set(batch_sizes)))
        self.choice = choose_provider(provider)
        self.on_device = self.choice.used != "cpu"
        initializers = {tensor.name for tensor in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in initializers]
        self._session = None
        self._model: onnx.ModelProto | None = None
        if self.on_device:
            # A device makes a graph per shape as each comes (_bind), from this; the
            # splines are shape-free, so written out once here, the norms fused per shape.
            self._model = _compacted(model, self.rewrites)
        else:
            # The session holds its own copy of the weights, so the graph is not kept: with
            # theirs the voice's three engines held 90 MB more (the voice alone on the
            # 2-vCPU VM: malloc in use 276.5 against 186.3 MB, RSS 348.0 against 260.1,
            # bench/results/voice_memory_probe_vm_2core_xeon.txt).
            self._session = build_session(cpu_graph(model, self.rewrites).SerializeToString(),
                                          "cpu", threads)[0]
        self._bound: dict[tuple[Shapes, int], _Bound] = {}
        self._prepared: set[Shapes] = set()  # on the CPU, the shapes prepare() has run
        self.transfers = Transfers()
        self.device_copies: dict[tuple[Shapes, int], int | None] = {}
        self.notes: list[str] = []

    def run(self, feed: dict[str, np.ndarray | DeviceColumns], deadline: float | None = None,
            keep: Keep | None = None) -> list[np.ndarray] | None:
        """The outputs for `feed` (every input, by name), as host arrays of their own.
        `deadline` (time.perf_counter() seconds; None: now) orders device runs.

        With `keep`, the outputs are not returned (None is) but given to `keep` where
        they are: on a device as DeviceColumns of the run's output buffers (one per
        output, its trailing axis as columns), on the device's thread before any other
        run, never downloaded; on the CPU as the host arrays. An input may be
        DeviceColumns (a device engine's only): copied into the run's input buffer on
        the device, zeros past its valid columns."""
        key = tuple((name, feed[name].shape if _batched(feed[name]) else feed[name].tobytes())
                    for name in self.input_names)
        deadline = time.perf_counter() if deadline is None else deadline
        if self.on_device:
            return _QUEUE.run(self, key, feed, deadline, keep)
        outputs = _CPU_QUEUE.run(self, key, feed, deadline)
        if keep is None:
            return outputs
        keep(outputs)
        return None

    def batch_count(self, feed: dict[str, np.ndarray], waiting: int) -> int:
        """How many of `waiting` requests like `feed` to run as one batch: on the CPU up
        to CPU_BATCH; on the device by the run times measured when this shape's graphs
        were built (batch_count), and as many as the largest size holds until each is."""
        if not self.on_device:
            return min(waiting, CPU_BATCH)
        run_s = {}
        for size in self.batch_sizes:
            bound = self._bound.get((self._shapes(feed, size), size))
            if bound is None:
                return min(waiting, max(self.batch_sizes))
            run_s[size] = bound.run_s
        return batch_count(waiting, run_s)

    def prepare(self, feed: dict[str, np.ndarray]) -> None:
        """Build (and capture) `feed`'s shape at every batch size: warm-up. A shape this
        engine has already prepared is not run again: the engines are shared by every
        voice made of the same model (a window reopened, a voice switched back to), and
        their warm-up re-ran all 26 shapes, ~1.0 s of CPU on the 2-vCPU VM, for nothing."""
        if self._session is not None:
            shapes = self._shapes(feed, 1)
            if shapes not in self._prepared:
                self.run(feed)
                self._prepared.add(shapes)
            return
        for size in self.batch_sizes:
            if (self._shapes(feed, size), size) in self._bound:
                continue
            requests = [_Request(0.0, 0, self, (), feed) for _ in range(size)]
            _QUEUE.exclusive(lambda: self._execute(requests))

    @property
    def run_seconds(self) -> dict[tuple[Shapes, int], float]:
        """Each built shape and batch size → its run time, measured when it was built."""
        return {key: bound.run_s for key, bound in self._bound.items()}

    @property
    def graphs(self) -> int:
        """Graphs (shape and batch size) whose runs replay a captured CUDA graph."""
        return sum(bound.graph for bound in self._bound.values())

    def _execute(self, requests: list[_Request]) -> None:
        """Run `requests` (one key) as one batch; the caller holds a lane."""
        feeds = [r.feed for r in requests]
        if self._session is not None:
            outputs = self._session.run(None, self._stacked(feeds))
            for row, request in enumerate(requests):
                request.outputs = [out[row:row + 1] if len(feeds) > 1 else out for out in outputs]
            return
        size = next(s for s in self.batch_sizes if s >= len(feeds))
        # Inputs on the device are copied row by row below; the padding rows keep
        # whatever the buffer held (rows of a batch do not mix).
        on_device = {name for name in self.input_names if isinstance(feeds[0][name], DeviceColumns)}
        host = [name for name in self.input_names if name not in on_device]
        batch = self._stacked(feeds + [feeds[0]] * (size - len(feeds)), host)
        shapes = self._shapes(feeds[0], size)
        bound = self._bound.get((shapes, size))
        if bound is None:
            bound = self._bind(shapes, size, {**batch, **{
                name: np.zeros(shape, np.float32) for name, shape in shapes if name in on_device}})
        counts = self.transfers
        for name, value in bound.inputs.items():
            if name in on_device:
                bound.held.pop(name, None)  # the buffer now holds what the device put there
                shape = value.shape()
                for index, feed in enumerate(feeds):
                    feed[name].copy_to(value.data_ptr() + index * _row_bytes(shape), shape[-1])
            else:
                array = np.ascontiguousarray(batch[name])
                if _upload_needed(bound.held, name, array):
                    value.update_inplace(array)
                    counts.uploads += 1
        if on_device:
            device_memory.synchronize()
        bound.session.run_with_iobinding(bound.binding)
        counts.runs += 1
        counts.batched += len(requests)
        kept = [request.keep is not None for request in requests]
        for row, request in enumerate(requests):
            if request.keep is not None:
                request.keep([_row_columns(value, row) for value in bound.outputs])
        if any(kept):
            device_memory.synchronize()
        if all(kept):
            return
        outputs = [value.numpy() for value in bound.outputs]
        counts.downloads += len(outputs)
        for row, request in enumerate(requests):
            if request.keep is None:
                request.outputs = [out[row:row + 1] if size > 1 else out for out in outputs]

    def _shapes(self, feed: dict[str, np.ndarray], size: int) -> Shapes:
        """The input shapes of a batch of `size` requests like `feed` (one key)."""
        return tuple((name, (size, *feed[name].shape[1:]) if _batched(feed[name])
                      else feed[name].shape) for name in self.input_names)

    def _stacked(self, feeds: list[dict[str, np.ndarray]],
                 names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """One feed of `feeds` (one key), of the inputs `names` (None: every input):
        batched inputs joined along their first axis."""
        names = self.input_names if names is None else names
        if len(feeds) == 1:
            return {name: feeds[0][name] for name in names}
        return {name: np.concatenate([f[name] for f in feeds]) if _batched(feeds[0][name])
                else feeds[0][name] for name in names}

    def _bind(self, shapes: Shapes, size: int, feed: dict[str, np.ndarray]) -> _Bound:
        # Fused last: onnx's shape inference knows no LayerNormalization below opset 17
        # (the voice's is 15).
        static = _fused(dense_masked_indexing(fixed_shapes(self._model, dict(shapes))),
                        self.rewrites)
        if self.precision == "fp16":
            static = half_precision(static)
        try:
            bound = self._bound_session(static, feed, graph=True)
        except (RuntimeError, *_OrtError) as exc:
            shape_text = ", ".join(f"{n} {'x'.join(map(str, s))}" for n, s in shapes)
            note = f"{self.name} at {shape_text}: no CUDA graph ({exc})"
            self.notes.append(note)
            log.warning("%s", note)
            bound = self._bound_session(static, feed, graph=False)
        self.device_copies[shapes, size] = bound.copies
        self._bound[shapes, size] = bound
        return bound

    def _bound_session(self, static: onnx.ModelProto, feed: dict[str, np.ndarray],
                       graph: bool) -> _Bound:
        """`static`'s session with device buffers bound, run on `feed` until its CUDA
        graph is captured (with `graph`)."""
        session, copies = static_session(static.SerializeToString(), self.choice.used,
                                         self._threads, graph, self.precision == "tf32")
        held: dict[str, np.ndarray] = {}
        inputs = {}
        for name in self.input_names:
            array = np.ascontiguousarray(feed[name])
            _upload_needed(held, name, array)
            inputs[name] = onnxruntime.OrtValue.ortvalue_from_numpy(array, "cuda", 0)
        binding = session.io_binding()
        for name, value in inputs.items():
            binding.bind_ortvalue_input(name, value)
        outputs = []
        for output, declared in zip(session.get_outputs(), static.graph.output):
            dims = [d.dim_value for d in declared.type.tensor_type.shape.dim]
            if not all(dims):
                raise RuntimeError(f"output {output.name} has no static shape")
            value = onnxruntime.OrtValue.ortvalue_from_shape_and_type(
                dims, _DTYPES[output.type], "cuda", 0)
            binding.bind_ortvalue_output(output.name, value)
            outputs.append(value)
        for _ in range(_RUNS_TO_CAPTURE):
            session.run_with_iobinding(binding)
        times = []
        for _ in range(_TIMED_RUNS):
            start = time.perf_counter()
            session.run_with_iobinding(binding)
            for value in outputs:
                value.numpy()
            times.append(time.perf_counter() - start)
        return _Bound(session, binding, inputs, outputs, held, graph, copies,
                      float(np.median(times)))
