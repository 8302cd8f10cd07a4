"""pipeline/voice/latent_track.py on the host, and the strided copies
pipeline/infer/device_memory.py asks the device for, carried out here on host memory by
their arguments alone (the device carries out the same arguments on the H200:
tests/test_gpu_voice.py), and an engine on the CPU giving its outputs to `keep`."""

import ctypes

import numpy as np
import pytest

from pipeline.infer.device_memory import DeviceColumns
from pipeline.voice.latent_track import LatentTrack
from tests.harness.gil import python_run_by_others

CHANNELS = 5


def _output(width: int, seed: int) -> np.ndarray:
    """A flow run's output as the CPU engine gives it: (1, channels, width)."""
    return np.random.default_rng(seed).standard_normal((1, CHANNELS, width)).astype(np.float32)


def test_a_track_holds_what_each_run_wrote_where_it_wrote_it_and_reads_zeros_past_valid():
    track = LatentTrack(CHANNELS, on_device=False)
    expected = np.zeros((CHANNELS, 0), np.float32)
    at = 0
    for seed in range(12):  # past the first capacity (256 columns): it grows, keeping them
        run = _output(128, seed)
        skip, count = (0, 96) if seed == 0 else (32, 64)
        track.writer(skip, at, count)([run])
        expected = np.concatenate([expected[:, :at], run[0, :, skip:skip + count]], axis=1)
        at += count - 10  # the next run overwrites the last 10 columns, as a lookahead's
    assert track.capacity >= at + 10 > 256
    valid = expected.shape[1]
    for left, width in ((0, 20), (37, 50), (valid - 30, 60), (valid + 5, 8)):
        window = track.window(left, width, valid)
        want = np.zeros((1, CHANNELS, width), np.float32)
        held = max(0, min(width, valid - left))
        want[0, :, :held] = expected[:, left:left + held]
        np.testing.assert_array_equal(window, want)
        window[...] = 7  # a window is the caller's own
        assert not np.any(track.window(left, width, valid) == 7)


def test_a_cleared_track_keeps_its_buffer_and_an_empty_count_writes_nothing():
    track = LatentTrack(CHANNELS, on_device=False)
    track.writer(0, 0, 40)([_output(40, 1)])
    track.frames, track.ahead = 30, 10
    capacity = track.capacity
    track.clear()
    assert (track.frames, track.ahead, track.capacity) == (0, 0, capacity)
    before = track.window(0, 40, 40).copy()
    track.writer(0, 3, 0)([_output(40, 2)])
    np.testing.assert_array_equal(track.window(0, 40, 40), before)


def _carry_out(copy, memory: np.ndarray, base: int) -> None:
    """A Copy2D on host memory: `memory`'s bytes stand for device addresses from `base`."""
    for row in range(copy.height):
        dst = memory.ctypes.data + copy.dst - base + row * copy.dpitch
        if copy.src:
            src = memory.ctypes.data + copy.src - base + row * copy.spitch
            ctypes.memmove(dst, src, copy.width)
        else:
            ctypes.memset(dst, 0, copy.width)


@pytest.mark.parametrize("start,width,valid,at", [
    (0, 24, 24, 0), (13, 40, 40, 0), (13, 40, 17, 0), (100, 30, 0, 5), (3, 12, 12, 20)])
def test_device_columns_plan_the_copy_and_the_zeros_of_the_columns_asked_for(start, width, valid, at):
    rows, source_pitch, target_pitch = 4, 160, 64
    source = np.arange(rows * source_pitch, dtype=np.float32).reshape(rows, source_pitch) + 1
    target = np.full((rows, target_pitch), -1.0, np.float32)
    memory = np.concatenate([source.ravel(), target.ravel()])
    base = 1 << 40  # a device address: any, as long as every pointer is made from it
    columns = DeviceColumns(base, rows, source_pitch, start, width, valid)
    for copy in columns.plan(base + source.nbytes, target_pitch, at):
        if copy is not None:
            _carry_out(copy, memory, base)
    got = memory[source.size:].reshape(rows, target_pitch)
    want = np.full((rows, target_pitch), -1.0, np.float32)
    want[:, at:at + width] = 0.0
    want[:, at:at + valid] = source[:, start:start + valid]
    np.testing.assert_array_equal(got, want)
    assert columns.shape == (1, rows, width)


def test_a_cpu_engine_gives_its_outputs_to_keep_and_returns_none():
    from pipeline.infer.engine import Engine
    from pipeline.voice import streaming_tts as st

    graphs, channels = st.stage_graphs(st.BUNDLED_VOICE, speakers=False)
    flow = Engine("flow", graphs["flow"], "cpu")
    prior = np.random.default_rng(3).standard_normal((1, channels, 24)).astype(np.float32)
    feed = {st._PRIOR_LATENT: prior, st._FRAME_MASK: np.ones((1, 1, 24), np.float32)}
    kept = []
    assert flow.run(feed, keep=kept.append) is None
    (outputs,) = kept
    np.testing.assert_array_equal(outputs[0], flow.run(feed)[0])


def test_the_copies_reach_cuda_well_formed_where_no_driver_is():
    # The real libcudart (the test lock's nvidia-cuda-runtime) takes each argument as
    # declared: here each call then fails for want of a driver, by name. On a machine
    # with a GPU, tests/test_gpu_voice.py runs them for real.
    runtime = pytest.importorskip("cuda.bindings.runtime", reason="cuda-python is in the test lock")
    error, count = runtime.cudaGetDeviceCount()
    if int(error) == 0 and count:
        pytest.skip("a CUDA device is here: tests/test_gpu_voice.py copies on it")
    from pipeline.infer import device_memory
    from pipeline.infer.device_memory import CudaError

    columns = DeviceColumns(1 << 40, 4, 160, 13, 40, 17)
    with pytest.raises(CudaError, match=r"^cudaMemcpy2DAsync failed: .*cudaError"):
        columns.copy_to(1 << 41, 64, 3)
    with pytest.raises(CudaError, match=r"^cudaMemset2DAsync failed: .*cudaError"):
        DeviceColumns(1 << 40, 4, 160, 13, 40, 0).copy_to(1 << 41, 64, 3)
    with pytest.raises(CudaError, match=r"^cudaStreamSynchronize failed: .*cudaError"):
        device_memory.synchronize()


def test_the_device_copies_keep_the_gil_where_cuda_python_lets_it_go():
    """The device's thread makes these calls between runs, up to 129 for a batch of 64;
    one that lets the GIL go waits up to the switch interval to have it back while
    streams run Python (docs/gpu.md). Calls that each fail here for want of a driver
    (the way they fail is the same in both): through cuda.bindings
    another thread ran Python during them (130 times over 100,000, measured), through
    pipeline.infer.device_memory never."""
    runtime = pytest.importorskip("cuda.bindings.runtime", reason="cuda-python is in the test lock")
    from pipeline.infer import device_memory
    from pipeline.infer.device_memory import CudaError

    error, count = runtime.cudaGetDeviceCount()
    if int(error) == 0 and count:
        pytest.skip("a CUDA device is here: its copies would succeed, and take real time")
    columns = DeviceColumns(1 << 40, 4, 160, 13, 40, 0)
    device_memory.cudart()  # found and loaded before: finding it reads files

    def ours() -> None:
        for _ in range(10_000):
            for call in (lambda: columns.copy_to(1 << 41, 64, 3), device_memory.synchronize):
                try:
                    call()
                except CudaError:
                    pass

    def bindings() -> None:
        for _ in range(50_000):
            runtime.cudaMemset2DAsync(1 << 41, 256, 0, 160, 4, 0)
            runtime.cudaStreamSynchronize(0)

    assert python_run_by_others(bindings) > 0
    assert python_run_by_others(ours) == 0
