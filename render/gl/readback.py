"""Reading rendered frames back to the CPU without stalling the render tick: pixel buffer
objects, double-buffered, one frame of latency at most (AsyncReadback); and the plain
synchronous glReadPixels into a preallocated array (read_sync), the stall it avoids, for
the benchmark and for tests to compare against.

A synchronous glReadPixels into client memory makes the CPU wait until the GPU has
finished every command drawing the frame, then copies. With a pixel pack buffer bound,
glReadPixels only queues the copy into GPU-side memory and returns; a fence marks its
end, and the buffer is mapped at the next tick, when the fence has signalled, so the
tick never waits. With Mesa's llvmpipe the "GPU" is CPU threads, and its glReadPixels
into a buffer waits for the frame and copies there and then: see AsyncReadback for the
order of calls that keeps that wait off the tick.

Every call needs the GL context that made the AsyncReadback to be current.
"""

from __future__ import annotations

import ctypes

import numpy as np
from OpenGL import GL

_BYTES_PER_PIXEL = 4   # RGBA8


class _Slot:
    """One pixel buffer and the readback queued into it."""

    __slots__ = ("pbo", "fence", "tag", "order")

    def __init__(self, pbo: int) -> None:
        self.pbo = pbo
        self.fence = None    # GLsync of the queued readback; None when the slot is free
        self.tag = None
        self.order = 0       # request() count at the time: which queued frame is older


class AsyncReadback:
    """Reads width×height RGBA8 frames of the bound read framebuffer through two PBOs.

    Per display tick, after the frame is drawn and while its framebuffer is bound:

        got = readback.collect()      # the previous tick's frame, or None
        readback.request(tag)         # queue this frame's pixels (tag: e.g. its media time)

    Or, for a target that keeps its pixels between ticks (an OffscreenTarget nobody else
    draws into), the previous frame is requested before the next is drawn:

        readback.request(previous_tag)   # the frame drawn at the last tick, still there
        draw(); GL.glFlush()             # flushed: rasterised while the tick sleeps
        got = readback.collect()         # that previous frame

    On a GPU neither order waits. With llvmpipe, whose glReadPixels into a buffer waits
    for the frame's rasterisation and copies on the spot, the first order makes every
    tick wait for its frame (1280×720 avatar: +12.97 ms a tick) and the second only for
    what is left of the previous one (+3.11 ms; the copy alone 0.98 ms and collect's
    0.88 ms; bench/results/readback.json, 2-core VM).

    Invariants: request() only queues (on a GPU: llvmpipe's driver does the copy inside
    glReadPixels) and collect() never waits (a fence not yet signalled makes it return
    None and count `not_ready`); a frame requested at tick N is returned by the first
    collect() after the request of tick N+1 if its fence has signalled by then (one
    frame of latency at most); frames come out in request order, and a request that
    finds both buffers holding uncollected frames overwrites the older one (counted in
    `dropped`). Nothing is allocated per frame but a few small Python objects: the
    pixels land in one preallocated array.
    """

    def __init__(self, width: int, height: int) -> None:
        for n in (width, height):
            if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                raise ValueError(f"readback size must be whole pixels, not {width!r}×{height!r}")
        self.width, self.height = width, height
        self.nbytes = width * height * _BYTES_PER_PIXEL
        buffers = GL.glGenBuffers(2)
        self._slots = [_Slot(int(pbo)) for pbo in buffers]
        for slot in self._slots:
            GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, slot.pbo)
            # STREAM_READ: written by GL once, read by the application once.
            GL.glBufferData(GL.GL_PIXEL_PACK_BUFFER, self.nbytes, None, GL.GL_STREAM_READ)
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
        # GL's rows come bottom row first; the caller gets a reversed view of them, top
        # row first, so flipping costs no copy.
        self._pixels = np.zeros((height, width, 4), dtype=np.uint8)
        self._flat = self._pixels.reshape(-1)
        self._top_first = self._pixels[::-1]
        self._mapped_type = ctypes.c_ubyte * self.nbytes
        self._next = 0
        self.requested = 0
        self.collected = 0
        self.not_ready = 0
        self.dropped = 0
        self.passed_over = 0

    def request(self, tag=None) -> None:
        """Queue a copy of the bound read framebuffer's width×height pixels at (0, 0),
        with `tag` to be returned alongside them. Returns at once."""
        slot = self._slots[self._next]
        if slot.fence is not None:
            # Both buffers hold frames nobody collected: this one is the older.
            GL.glDeleteSync(slot.fence)
            self.dropped += 1
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, slot.pbo)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        GL.glReadPixels(0, 0, self.width, self.height, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, 0)
        # A pack buffer left bound would turn every other glReadPixels in this context
        # (read_framebuffer's, Qt's grabs) into a write at an offset into it.
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
        slot.fence = GL.glFenceSync(GL.GL_SYNC_GPU_COMMANDS_COMPLETE, 0)
        # Submit now: a fence in commands still queued on the CPU side never signals, and
        # an offscreen target has no buffer swap to flush them.
        GL.glFlush()
        self.requested += 1
        slot.tag = tag
        slot.order = self.requested
        self._next ^= 1

    def collect(self):
        """(pixels, tag) of the oldest requested frame not yet collected, if its
        readback has finished; None if there is none or it has not finished (never
        waits). `pixels` is an H×W×4 uint8 RGBA view, top row first (negative row
        stride), of one array reused by every collect: valid until the next one."""
        queued = [slot for slot in self._slots if slot.fence is not None]
        if not queued:
            return None
        slot = min(queued, key=lambda s: s.order)
        # Timeout 0: only ask whether it has signalled.
        state = GL.glClientWaitSync(slot.fence, 0, 0)
        if state not in (GL.GL_ALREADY_SIGNALED, GL.GL_CONDITION_SATISFIED):
            self.not_ready += 1
            return None
        GL.glDeleteSync(slot.fence)
        slot.fence = None
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, slot.pbo)
        address = GL.glMapBufferRange(GL.GL_PIXEL_PACK_BUFFER, 0, self.nbytes, GL.GL_MAP_READ_BIT)
        try:
            if not address:
                raise RuntimeError("glMapBufferRange returned no pointer for a pixel buffer")
            mapped = np.frombuffer(self._mapped_type.from_address(int(address)), dtype=np.uint8)
            np.copyto(self._flat, mapped)
        finally:
            GL.glUnmapBuffer(GL.GL_PIXEL_PACK_BUFFER)
            GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
        self.collected += 1
        return self._top_first, slot.tag

    def collect_newest(self):
        """collect() until nothing more is ready: the newest finished frame, with any
        older one collected on the way counted in `passed_over` and not returned. After
        a tick whose frame was not ready, the next tick finds two finished frames; taking
        only the older, as collect() does, would keep every later frame a tick late too
        (on the H200 a single miss left 140 of 140 frames 2 ticks from draw to host:
        bench/results/yuv_readback_h200.json, feed_next_tick_*)."""
        got = None
        while (ready := self.collect()) is not None:
            if got is not None:
                self.passed_over += 1
            got = ready
        return got

    def stats(self) -> dict:
        return {"requested": self.requested, "collected": self.collected,
                "not_ready": self.not_ready, "dropped": self.dropped,
                "passed_over": self.passed_over}

    def release(self) -> None:
        """Delete the fences and buffers. Safe to call twice."""
        for slot in self._slots:
            if slot.fence is not None:
                GL.glDeleteSync(slot.fence)
                slot.fence = None
        if self._slots:
            GL.glDeleteBuffers(len(self._slots), [slot.pbo for slot in self._slots])
        self._slots = []


def read_sync(out: np.ndarray) -> np.ndarray:
    """The bound read framebuffer's pixels read at once into `out` (H×W×4 uint8,
    C-contiguous, bottom row first as GL gives them), waiting for the frame to finish;
    returns the top-row-first view of `out`. The comparison for AsyncReadback."""
    if out.dtype != np.uint8 or out.ndim != 3 or out.shape[2] != 4 or not out.flags.c_contiguous:
        raise ValueError(f"out is {out.dtype} {out.shape}; expected C-contiguous uint8 H×W×4")
    height, width = out.shape[:2]
    GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
    GL.glReadPixels(0, 0, width, height, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, out)
    return out[::-1]
