"""Asynchronous PBO readback (render/gl/readback.py) on a real Mesa context under Xvfb:
the bundled avatar drawn by the sprite renderer into an OffscreenTarget and read back.

Not tested here: collect() finding a fence unsignalled. On llvmpipe glReadPixels into a
pixel buffer waits for the frame and copies before it returns (measured: the fence has
always signalled by the next call, bench/readback.py), so no readback is ever still in
flight; on a GPU it is, and collect() then returns None and counts it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.display

REPO = Path(__file__).resolve().parent.parent

# Not multiples of 4 or 8: the rows of a width like this are not padded in any buffer.
SIZE = (301, 203)


@pytest.fixture(scope="module")
def rig():
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.rigs.sprite import load_sprite_rig

    return load_sprite_rig(DEFAULT_AVATAR_MANIFEST, 256)


@pytest.fixture
def avatar(qt_app, rig):
    """(target, draw(k)): the avatar drawn with a different mouth, blink and breath at each
    k, over a half-transparent background so every channel varies across the frame."""
    from pipeline.core.frames import MouthPose
    from render.gl.offscreen import OffscreenTarget
    from render.gl.sprite_renderer import SpriteGLRenderer

    with OffscreenTarget(*SIZE) as target:
        renderer = SpriteGLRenderer(clear_color=(0.2, 0.4, 0.9, 0.5))
        renderer.initialize()
        renderer.set_rig(rig)
        renderer.resize(*SIZE)

        def draw(k: int) -> None:
            renderer.draw(MouthPose(k % 15, (k * 7 + 3) % 15, (k % 5) / 4, 0.5),
                          blink=(k % 3) / 2, breath=k / 10)

        yield target, draw
        renderer.release()


def test_async_pixels_equal_the_synchronous_read_of_the_same_frame(avatar):
    from OpenGL import GL

    from render.gl.readback import AsyncReadback, read_sync

    target, draw = avatar
    w, h = SIZE
    readback = AsyncReadback(w, h)
    sync = np.empty((h, w, 4), np.uint8)
    expected = {}
    got_tags = []
    for k in range(8):
        draw(k)
        expected[k] = read_sync(sync).copy()
        # The reader the rest of the app uses agrees on orientation and content.
        assert np.array_equal(expected[k], target.read_pixels())
        got = readback.collect()
        readback.request(k)
        # A pack buffer left bound would make every later glReadPixels write into it.
        assert GL.glGetIntegerv(GL.GL_PIXEL_PACK_BUFFER_BINDING) == 0
        if got is not None:
            pixels, tag = got
            assert pixels.shape == (h, w, 4) and pixels.dtype == np.uint8
            assert np.array_equal(pixels, expected[tag]), f"frame {tag} differs"
            got_tags.append(tag)
    assert got_tags == list(range(7))
    # Frames differ from each other, so equality above is not one frame matched 7 times.
    assert not np.array_equal(expected[0], expected[1])
    readback.release()
    readback.release()


def test_bottom_row_of_gl_comes_back_last(qt_app):
    from OpenGL import GL

    from render.gl.offscreen import OffscreenTarget
    from render.gl.readback import AsyncReadback

    with OffscreenTarget(8, 6):
        GL.glClearColor(1.0, 0.0, 0.0, 1.0)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        GL.glEnable(GL.GL_SCISSOR_TEST)
        GL.glScissor(0, 0, 8, 1)    # GL's y = 0 is the bottom row
        GL.glClearColor(0.0, 1.0, 0.0, 1.0)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        GL.glDisable(GL.GL_SCISSOR_TEST)
        readback = AsyncReadback(8, 6)
        readback.request("only")
        pixels, tag = readback.collect()
        assert tag == "only"
        assert pixels[0, 0].tolist() == [255, 0, 0, 255]
        assert pixels[-1, 3].tolist() == [0, 255, 0, 255]
        readback.release()


def test_one_frame_of_latency_at_most_at_60_fps_ticks(avatar):
    """Each tick: draw, collect, request, then sleep out the 16.7 ms period, as the
    display tick does. Frame N comes out at tick N+1, every time."""
    from render.gl.readback import AsyncReadback

    _target, draw = avatar
    readback = AsyncReadback(*SIZE)
    period = 1 / 60
    start = time.perf_counter()
    for k in range(12):
        draw(k)
        got = readback.collect()
        readback.request(k)
        if k == 0:
            assert got is None
        else:
            assert got is not None and got[1] == k - 1, (k, got and got[1])
        time.sleep(max(0.0, start + (k + 1) * period - time.perf_counter()))
    assert readback.stats() == {"requested": 12, "collected": 11, "not_ready": 0, "dropped": 0,
                                "passed_over": 0}
    readback.release()


def test_frames_come_out_oldest_first_and_a_third_request_drops_the_oldest(avatar):
    from render.gl.readback import AsyncReadback, read_sync

    _target, draw = avatar
    w, h = SIZE
    readback = AsyncReadback(w, h)
    frames = {}
    for k in range(3):
        draw(k)
        frames[k] = read_sync(np.empty((h, w, 4), np.uint8)).copy()
        readback.request(k)
    # Frame 0 was overwritten by frame 2's request; 1 then 2 remain, in that order.
    assert readback.dropped == 1
    for k in (1, 2):
        pixels, tag = readback.collect()
        assert tag == k and np.array_equal(pixels, frames[k])
    assert readback.collect() is None
    readback.release()


def test_collect_newest_takes_the_newest_finished_frame_and_passes_the_older_over(avatar):
    """Two frames finished and uncollected (a tick whose collect found its frame not yet
    ready, then the next tick's frame): the newest comes out, the older is counted."""
    from OpenGL import GL

    from render.gl.readback import AsyncReadback, read_sync

    _target, draw = avatar
    w, h = SIZE
    readback = AsyncReadback(w, h)
    for k in range(2):
        draw(k)
        readback.request(k)
    newest = read_sync(np.empty((h, w, 4), np.uint8)).copy()
    GL.glFinish()  # both fences signalled, as a tick later on a GPU
    pixels, tag = readback.collect_newest()
    assert tag == 1 and np.array_equal(pixels, newest)
    assert readback.stats()["passed_over"] == 1 and readback.collected == 2
    assert readback.collect_newest() is None
    readback.release()


def _allocations_over_30_frames(w: int, h: int) -> dict:
    """Peak bytes Python and numpy allocated (tracemalloc) over 30 frames of w×h read back
    through one AsyncReadback, after 3 frames of PyOpenGL's lazy set-up, and how many
    distinct arrays the frames came back in. Run in a process of its own: tracemalloc
    counts every thread's allocations, and in the suite's process threads left by other
    tests allocated 121,823 bytes under this measurement (CI, a window's voice loader)."""
    from OpenGL import GL
    from PySide6.QtGui import QGuiApplication

    from render.gl.offscreen import OffscreenTarget
    from render.gl.readback import AsyncReadback

    app = QGuiApplication([])  # kept alive to the end: the context needs it
    with OffscreenTarget(w, h):
        readback = AsyncReadback(w, h)
        arrays = set()

        def tick(k: int) -> None:
            GL.glClearColor(k / 40, 0.5, 0.25, 1.0)
            GL.glClear(GL.GL_COLOR_BUFFER_BIT)
            got = readback.collect()
            readback.request(k)
            if got is not None:
                arrays.add(id(got[0]))
                assert got[0][0, 0, 0] == round((k - 1) / 40 * 255)

        for k in range(3):
            tick(k)
        tracemalloc.start()
        tracemalloc.reset_peak()
        for k in range(3, 33):
            tick(k)
        _now, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        readback.release()
    return {"peak": peak, "arrays": len(arrays)}


def test_no_pixel_buffer_is_allocated_per_frame(x_display):
    """The same array comes back every frame, and 30 frames of 640×360 (921,600 bytes
    each) allocate less than a tenth of one frame in all (tracemalloc sees numpy's
    buffers; what remains is PyOpenGL's and numpy's small per-call objects: 12,192 bytes
    on the 2-core VM)."""
    w, h = 640, 360
    code = ("import json; from tests.test_readback import _allocations_over_30_frames as m; "
            f"print(json.dumps(m({w}, {h})))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout.splitlines()[-1])
    assert measured["peak"] < w * h * 4 / 10, measured
    assert measured["arrays"] == 1
