"""The CUDA renderers' own code, run where no GPU is. Every cuda-python call they make
goes through the real bindings, which check each argument's type and number before they
need a driver; where a call then fails for want of one, it gives back a stand-in of what
it returns (interop.check and the driver calls are wrapped), so the flow goes on. NVRTC's
library is not installed here, so the kernels' PTX is a stand-in too (their source is
compiled by g++ in tests/test_kernels_on_cpu.py and by NVRTC on the GPU).

What this shows: every call is well formed, and the renderers make the calls they should
— the rig's uploads once, per frame a map, a surface, the launches and an unmap and no
copy or allocation, every registration and buffer let go. What the driver does with the calls is
tests/test_gpu_frames.py's, on an NVIDIA GPU."""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("cuda.bindings", reason="cuda-python is in the test lock: run make test")

from cuda.bindings import driver, runtime  # noqa: E402
from cuda.pathfinder import DynamicLibNotFoundError  # noqa: E402

from pipeline.core.frames import MouthPose  # noqa: E402

pytestmark = pytest.mark.display

# What each call gives back when it fails for want of a driver: its result's type.
STAND_INS = {
    "cuModuleLoadData": driver.CUmodule(), "cuModuleGetFunction": driver.CUfunction(),
    "cudaStreamCreateWithFlags": runtime.cudaStream_t(), "cudaMemcpy": None,
    "cudaGraphicsGLRegisterImage": runtime.cudaGraphicsResource_t(), "cudaGraphicsMapResources": None,
    "cudaGraphicsUnmapResources": None, "cudaGraphicsSubResourceGetMappedArray": runtime.cudaArray_t(),
    "cudaCreateSurfaceObject": runtime.cudaSurfaceObject_t(), "cudaMallocMipmappedArray": runtime.cudaMipmappedArray_t(),
    "cudaGetMipmappedArrayLevel": runtime.cudaArray_t(),
    "cudaGraphicsResourceGetMappedMipmappedArray": runtime.cudaMipmappedArray_t(),
    "cudaMemcpy2DArrayToArray": None, "cudaCreateTextureObject": runtime.cudaTextureObject_t(),
    "cuLaunchKernel": None, "cudaFree": None, "cudaMemsetAsync": None, "cudaStreamSynchronize": None,
}
# Called without interop.check (their results are not needed): counted here.
UNCHECKED = ("cudaGraphicsUnregisterResource", "cudaDestroySurfaceObject", "cudaDestroyTextureObject",
             "cudaFreeMipmappedArray", "cudaStreamDestroy")
DRIVER = ("cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel", "cuModuleUnload")


@pytest.fixture()
def calls(monkeypatch, qt_app):
    """A current GL context (llvmpipe), the renderers and the mouth paths' picker told
    CUDA is there, and a Counter of the calls made."""
    from render.gl.offscreen import OffscreenTarget
    from render.gpu import cuda_photo_renderer, cuda_sprite_renderer, interop

    made: Counter = Counter()
    checked = interop.check

    def check(result, call):
        made[call] += 1
        try:
            return checked(result, call)
        except interop.CudaError:
            if call == "cudaMalloc":  # an address of its own, for cudaFree's count
                return 0x1000 * (made[call] + 1)
            return STAND_INS[call]

    def counted(name, function):
        def call(*args):
            made[name] += 1
            return function(*args)
        return call

    def without_driver(function):
        def call(*args):
            try:
                return function(*args)  # the binding checks the arguments first
            except DynamicLibNotFoundError:
                return (driver.CUresult.CUDA_ERROR_NO_DEVICE, None)
        return call

    monkeypatch.setattr(interop, "check", check)
    monkeypatch.setattr(interop, "_ptx", lambda source, name: b"// stand-in PTX\n")
    for name in UNCHECKED:
        monkeypatch.setattr(runtime, name, counted(name, getattr(runtime, name)))
    for name in DRIVER:
        monkeypatch.setattr(driver, name, without_driver(getattr(driver, name)))
    for module in (cuda_photo_renderer, cuda_sprite_renderer, interop):
        monkeypatch.setattr(module, "cuda_unavailable", lambda: None)
    free = runtime.cudaFree

    def freed(pointer):
        made["buffers freed"] += int(pointer) != 0
        return free(pointer)

    monkeypatch.setattr(runtime, "cudaFree", freed)
    with OffscreenTarget(512, 512):
        yield made


def test_the_photo_renderer_uploads_once_and_makes_each_frame_with_three_launches(calls):
    from render.gpu.cuda_photo_renderer import CudaPhotoRenderer
    from tests.harness.drawn_portrait import drawn_portrait

    rig = drawn_portrait()
    renderer = CudaPhotoRenderer()
    renderer.initialize()
    renderer.set_rig(rig)
    renderer.resize(512, 512)
    after_rig = calls.copy()
    assert after_rig["cudaMemcpy"] == 5 == renderer.host_copies      # records, basis, statics, 2 triangle lists
    assert after_rig["cudaMemcpy2DArrayToArray"] == 10                # the picture's 10 levels, device to device
    poses = [MouthPose(v, (v + 3) % 15, 0.4, 0.8) for v in range(6)]
    for i, pose in enumerate(poses):
        renderer.draw(pose, 0.6 if i % 2 else 0.0, 0.3)
    renderer.draw(poses[-1], 0.6, 0.3)  # the same pose: the frame is kept
    frames = calls - after_rig
    assert renderer.frames == len(poses)
    assert frames["cuLaunchKernel"] == 3 * len(poses)                 # skin, the opening, then each pixel's latest
    assert frames["cudaGraphicsMapResources"] == frames["cudaGraphicsUnmapResources"] == len(poses)
    assert frames["cudaCreateSurfaceObject"] == frames["cudaDestroySurfaceObject"] == len(poses)
    assert frames["cudaMemcpy"] == frames["cudaMalloc"] == 0          # no copy, no allocation per frame
    assert renderer.vertex_uploads == 3                               # the eyes' records, blinking frames only
    p = renderer._params[0]
    rows, weights = rig.pose_terms(poses[-1], 0.6)
    assert tuple(p["rows"]) == rows and np.allclose(p["weights"], weights)
    assert (p["width"], p["height"]) == renderer.mouth_size and p["mipmaps"] == 0
    assert p["snap"] == 256.0 and p["vertices"] == rig.vertex_count

    renderer.resize(300, 300)  # shown smaller: a smaller frame, sampled from the mipmaps
    renderer.draw(poses[0], 0.0, 0.0)
    p = renderer._params[0]
    assert p["mipmaps"] == 1 and (p["width"], p["height"]) == renderer.mouth_size
    renderer.release()
    # The picture (registered to copy it, then let go) and each frame texture made.
    assert calls["cudaGraphicsGLRegisterImage"] == calls["cudaGraphicsUnregisterResource"] >= 3
    assert calls["cudaDestroyTextureObject"] == calls["cudaFreeMipmappedArray"] == 1
    # The pixels' latest-triangle buffer: one zeroed for each size the frame had.
    assert calls["cudaMemsetAsync"] >= 2 and calls["cudaMalloc"] == 5 + calls["cudaMemsetAsync"]
    assert calls["buffers freed"] == calls["cudaMalloc"] and calls["cudaStreamDestroy"] == 1


def test_the_sprite_renderer_uploads_once_and_makes_each_frame_with_one_launch(calls):
    from render.gpu.cuda_sprite_renderer import CudaSpriteRenderer
    from tests.harness.drawn_rig import drawn_rig

    rig = drawn_rig(128)
    renderer = CudaSpriteRenderer()
    renderer.initialize()
    renderer.set_rig(rig)
    renderer.resize(200, 100)
    after_rig = calls.copy()
    # One upload per image: base, two eyes, the mouths, and the drawn rig's three expression
    # layers (happy's eyes and blush, sad's tear).
    images = 3 + len(rig.mouths) + 3
    assert after_rig["cudaMemcpy"] == images == renderer.host_copies
    for i in range(4):
        renderer.draw(MouthPose(i, i + 1, 0.5, 0.5), 0.2, 0.1, 0.9)
    frames = calls - after_rig
    assert frames["cuLaunchKernel"] == 4 == renderer.frames
    assert frames["cudaGraphicsMapResources"] == frames["cudaGraphicsUnmapResources"] == 4
    assert frames["cudaMemcpy"] == frames["cudaMalloc"] == 0
    renderer.resize(100, 100)
    renderer.release()
    assert calls["cudaGraphicsGLRegisterImage"] == calls["cudaGraphicsUnregisterResource"] == 2
    assert calls["buffers freed"] == images and calls["cudaStreamDestroy"] == 1


def test_an_output_asked_for_cuda_draws_with_the_cuda_renderer_of_each_kind(calls):
    """The frame feed (as every output) makes its renderer through the mouth paths'
    picker: on CUDA, each kind of rig gets its CUDA renderer, drawing with its launches."""
    from render.gpu.cuda_photo_renderer import CudaPhotoRenderer
    from render.gpu.cuda_sprite_renderer import CudaSpriteRenderer
    from render.gpu.path_picker import MouthPathPicker
    from render.outputs.frame_feed import FrameFeed
    from tests.harness.drawn_portrait import drawn_portrait
    from tests.harness.drawn_rig import drawn_rig

    picker = MouthPathPicker("cuda")
    feed = FrameFeed(160, 120, 30.0, mouth_paths=picker)
    try:
        feed.set_rig(drawn_rig(128))
        assert type(feed.renderer) is CudaSpriteRenderer and feed.renderer.viewport == (160, 120)
        launched = calls["cuLaunchKernel"]
        feed.renderer.draw(MouthPose(3, 4, 0.5, 0.5), 0.0, 0.0)
        assert calls["cuLaunchKernel"] == launched + 1
        feed.set_rig(drawn_portrait())
        assert type(feed.renderer) is CudaPhotoRenderer
        assert picker.summary() == "mouth frames by CUDA, as the settings ask"
        assert picker.warnings() == []
    finally:
        feed.stop()
    assert picker.summary() is None  # the feed draws no more
    assert calls["cudaStreamDestroy"] == 2  # both CUDA renderers let go


def test_auto_times_both_paths_once_per_rig_and_size_and_takes_the_lower_p99(calls):
    """The picker's own flow on llvmpipe, CUDA's calls going nowhere: what it times, when
    it times again, and that the renderer follows the choice. (Which path wins here says
    nothing: tests/test_gpu_frames.py times them on a GPU.)"""
    from render.gpu.mouth_path import choose
    from render.gpu.path_picker import MouthPathPicker
    from render.gpu.path_timing import MEASURED_FRAMES, WARM_UP_FRAMES
    from render.rigs.loader import renderer_type
    from tests.harness.drawn_portrait import drawn_portrait
    from tests.harness.drawn_rig import drawn_rig

    picker = MouthPathPicker("auto")
    window, feed = object(), object()  # two outputs
    rig = drawn_rig(128)
    renderer = picker.made(rig, (0.0, 0.0, 0.0, 0.0), (128, 128), window)
    [times] = picker.measured(rig)
    assert (times.size, times.frames) == ((128, 128), MEASURED_FRAMES)
    # One launch per CUDA frame: warm-up and timed.
    assert calls["cuLaunchKernel"] == WARM_UP_FRAMES + MEASURED_FRAMES
    chosen = choose("auto", None, times)
    assert type(renderer) is renderer_type(rig, chosen.path)
    assert picker.summary() == f"mouth frames by {chosen.reason}"
    # Another output near that size, or this one a little larger: no new timing.
    other = picker.made(rig, (0.0, 0.0, 0.0, 0.0), (150, 150), feed)
    renderer.resize(170, 170)
    assert picker.resized(renderer, rig, (170, 170), window) is renderer
    assert len(picker.measured(rig)) == 1 and calls["cuLaunchKernel"] == WARM_UP_FRAMES + MEASURED_FRAMES
    # Four times the pixels: timed again there.
    renderer.resize(256, 256)
    renderer = picker.resized(renderer, rig, (256, 256), window)
    assert [t.size for t in picker.measured(rig)] == [(128, 128), (256, 256)]
    assert type(renderer) is renderer_type(rig, choose("auto", None, picker.measured(rig)[1]).path)
    # A photo rig: its mouth frame timed, its kept times alone.
    portrait = drawn_portrait(size=256)
    photo = picker.show(renderer, portrait, (256, 256), window)
    [times] = picker.measured(portrait)
    assert type(photo) is renderer_type(portrait, choose("auto", None, times).path)
    assert calls["cudaStreamSynchronize"] == WARM_UP_FRAMES + MEASURED_FRAMES  # CUDA's waited for
    for made in (photo, other):
        made.release()


def test_a_cuda_renderer_that_fails_leaves_opengl_drawing_and_says_why(qt_app, monkeypatch):
    """The probe says CUDA is there, and the CUDA renderer then fails (here: the real
    bindings find no driver): OpenGL draws, and the warning names the failure."""
    from render.gl.offscreen import OffscreenTarget
    from render.gl.sprite_renderer import SpriteGLRenderer
    from render.gpu import interop
    from render.gpu.path_picker import MouthPathPicker
    from tests.harness.drawn_rig import drawn_rig

    monkeypatch.setattr(interop, "cuda_unavailable", lambda: None)
    picker = MouthPathPicker("cuda")
    with OffscreenTarget(64, 64):
        renderer = picker.made(drawn_rig(64), (0.0, 0.0, 0.0, 0.0), (64, 64), picker)
        assert type(renderer) is SpriteGLRenderer
        renderer.draw(MouthPose(1, 2, 0.5, 0.5), 0.0, 0.0)  # it draws
        renderer.release()
    [warning] = picker.warnings()
    assert warning.startswith("OpenGL: CUDA-GL interop failed here: no CUDA device")
    assert picker.summary() == f"mouth frames by {warning}"


def test_an_avatar_window_times_the_paths_in_its_own_context_and_again_when_resized(calls, qt_app):
    """The window's surface (as the main window's view) makes its renderer through the
    picker: timed in its own context before it draws, again when resized to 4× the
    pixels (resizeGL, where Qt makes no context current), and the CUDA renderer when
    CUDA is asked for."""
    from render.gpu.cuda_sprite_renderer import CudaSpriteRenderer
    from render.gpu.mouth_path import choose
    from render.gpu.path_picker import MouthPathPicker
    from render.outputs.avatar_window import AvatarWindow
    from render.rigs.loader import renderer_type
    from tests.harness.avatar_window import show_drawn
    from tests.harness.drawn_rig import drawn_rig

    picker = MouthPathPicker("auto")
    window = AvatarWindow((160, 120), mouth_paths=picker)
    rig = drawn_rig(128)
    try:
        window.set_rig(rig)
        show_drawn(qt_app, window)
        [times] = picker.measured(rig)
        assert times.size == window.renderer.viewport
        assert type(window.renderer) is renderer_type(rig, choose("auto", None, times).path)
        window.resize(2 * window.width(), 2 * window.height())
        end = time.monotonic() + 10  # the X server's resize comes back as an event
        while window.renderer.viewport == times.size and time.monotonic() < end:
            qt_app.processEvents()
            time.sleep(0.002)
        assert [t.size for t in picker.measured(rig)] == [times.size, window.renderer.viewport]
        picker.set_setting("cuda")
        window.set_rig(rig)  # as the studio does when the setting changes
        assert type(window.renderer) is CudaSpriteRenderer
        drawn, launched = window.draws, calls["cuLaunchKernel"]
        window.update()
        end = time.monotonic() + 10
        while window.draws == drawn and time.monotonic() < end:
            qt_app.processEvents()
            time.sleep(0.002)
        assert window.draws > drawn and calls["cuLaunchKernel"] > launched
    finally:
        window.shutdown()
        window.close()
        window.deleteLater()
        qt_app.processEvents()
