"""Rendered frames packed as YUYV 4:2:2 on the GPU, so that only those bytes cross to the
host: 2 a pixel, where RGBA takes 4. For the virtual camera (pyvirtualcam's
PixelFormat.YUYV, which its Linux backend writes to the v4l2 device as it is) and for
anything else that wants video rather than RGBA.

The pass (shaders/yuyv.*) takes a frame in premultiplied RGBA8 over nothing, as the
renderers draw it, puts it over an opaque colour (YUYV has no alpha) and writes each
pair of pixels (2i, 2i + 1) of a row as one RGBA8 texel (Y0, U, Y1, V) of a
width/2 × height framebuffer: in memory the bytes Y0 U Y1 V, V4L2_PIX_FMT_YUYV
(libyuv's YUY2).

Matrix: BT.601, limited range, on the frame's own R'G'B' in 0..1 (no linearisation):

    Y  =  16 +  65.481 R' + 128.553 G' +  24.966 B'
    Cb = 128 −  37.797 R' −  74.203 G' + 112.000 B'
    Cr = 128 + 112.000 R' −  93.786 G' −  18.214 B'

(Kr 0.299, Kb 0.114; Y spans 16..235, Cb and Cr 16..240.) A pair's Cb and Cr are those
of the mean of its two colours, the box filter libyuv's ARGB → YUY2 uses. Why BT.601
limited: it is V4L2's default Y'CbCr encoding and quantisation for a YUYV webcam frame
whose colourspace names no other (V4L2_MAP_YCBCR_ENC_DEFAULT, ..._QUANTIZATION_DEFAULT),
and the matrix the camera used before: pyvirtualcam converted its RGB frames with
libyuv's RAWToI420, BT.601 limited. A consumer that decodes HD frames as BT.709 instead
shows saturated colours off (pure green comes out (0, 216, 0)), as it did before.

Each output level is the exact value rounded to one of its two nearest integers (GL's
float → 8-bit conversion prefers the nearest; the spec allows either).

The frame is read from the framebuffer bound for reading when the pass runs: the
offscreen targets draw into renderbuffers (render/gl/offscreen.py), which no shader can
sample, so the pass first copies it into a texture of its own (glCopyTexSubImage2D, a
copy on the GPU). Every call needs the GL context that made the object to be current.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from OpenGL import GL

from pipeline.core.resources import SHADERS_DIR
from render.gl.readback import AsyncReadback
from render.gl.sprite_renderer import build_program, unit_quad

# The matrix above, rows Y, Cb, Cr, for yuyv_reference (the shader has its own copy in
# GLSL: shaders/yuyv.frag).
BT601_LIMITED = np.array([[65.481, 128.553, 24.966],
                          [-37.797, -74.203, 112.0],
                          [112.0, -93.786, -18.214]])


def check_yuyv_size(width: int, height: int) -> None:
    """ValueError unless width×height can be packed: whole pixels, an even width."""
    for n in (width, height):
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ValueError(f"frame size must be whole pixels, not {width!r}×{height!r}")
    if width % 2:
        raise ValueError(f"YUYV packs pixels in pairs along a row, so the width must be even; "
                         f"{width}×{height} is not: render at an even width")


def yuyv_reference(rgba: np.ndarray, background: tuple[int, int, int]) -> np.ndarray:
    """The pass's conversion in numpy, to check a GL's output against (tests, bench): the
    H×W×2 YUYV bytes of a premultiplied H×W×4 RGBA8 frame (top row first) over an opaque
    8-bit colour, composited and converted in float64 and rounded to the nearest level.
    The pass's bytes are within 1 level of these (see the module's docstring)."""
    colour = (rgba[..., :3] + (255 - rgba[..., 3:4]) * (np.asarray(background) / 255)) / 255
    out = np.empty(rgba.shape[:2] + (2,))
    out[..., 0] = 16 + colour @ BT601_LIMITED[0]
    mean = (colour[:, 0::2] + colour[:, 1::2]) / 2
    out[:, 0::2, 1] = 128 + mean @ BT601_LIMITED[1]
    out[:, 1::2, 1] = 128 + mean @ BT601_LIMITED[2]
    return np.round(out).astype(np.uint8)


@contextmanager
def _bindings_kept():
    """The framebuffers bound for drawing and reading and the viewport, as they were on
    entry, bound again on exit."""
    draw = int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING))
    read = int(GL.glGetIntegerv(GL.GL_READ_FRAMEBUFFER_BINDING))
    viewport = [int(v) for v in GL.glGetIntegerv(GL.GL_VIEWPORT)]
    try:
        yield
    finally:
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, draw)
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, read)
        GL.glViewport(*viewport)


def _texture(width: int, height: int) -> int:
    """An empty width×height RGBA8 texture, one level, nearest filtering."""
    texture = int(GL.glGenTextures(1))
    GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
    GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, width, height, 0, GL.GL_RGBA,
                    GL.GL_UNSIGNED_BYTE, None)
    # No mipmaps: a minifying filter that wants them would leave the texture incomplete,
    # and texelFetch of an incomplete texture reads zeros.
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, GL.GL_NEAREST)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    return texture


class YuyvPass:
    """Packs the width×height frame of the bound read framebuffer as YUYV over
    `background` (8-bit R, G, B; opaque) into `fbo`, a framebuffer of its own.

    Invariants: `fbo` holds width/2 × height RGBA8 texels, texel (i, j) made of frame
    pixels (2i, j) and (2i + 1, j) and nothing else (exact texel reads, no filtering),
    rows in the frame's order; pack() only queues GL commands (it never waits for the
    frame). Read it at once with readback.read_sync into an H×(W/2)×4 array, or through
    YuyvReadback.
    """

    def __init__(self, width: int, height: int, background: tuple[int, int, int]) -> None:
        check_yuyv_size(width, height)
        self.width, self.height = width, height
        with _bindings_kept():
            self._program = build_program(SHADERS_DIR / "yuyv.vert", SHADERS_DIR / "yuyv.frag")
            GL.glUseProgram(self._program)
            GL.glUniform1i(GL.glGetUniformLocation(self._program, "u_frame"), 0)
            GL.glUniform3f(GL.glGetUniformLocation(self._program, "u_background"),
                           *(channel / 255 for channel in background))
            GL.glUseProgram(0)
            self._vao, self._vbo = unit_quad()
            self._frame = _texture(width, height)
            self._packed = _texture(width // 2, height)
            self.fbo = int(GL.glGenFramebuffers(1))
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
            GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0,
                                      GL.GL_TEXTURE_2D, self._packed, 0)
            status = GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER)
            if status != GL.GL_FRAMEBUFFER_COMPLETE:
                self.release()
                raise RuntimeError(f"the GL driver refused a {width // 2}×{height} RGBA8 "
                                   f"framebuffer for YUYV (status 0x{int(status):x})")

    def pack(self) -> None:
        """Pack the frame now in the bound read framebuffer at (0, 0). Leaves `fbo` bound
        for drawing and reading, with its viewport, and blending off."""
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._frame)
        GL.glCopyTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, 0, 0, 0, self.width, self.height)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        GL.glViewport(0, 0, self.width // 2, self.height)
        GL.glDisable(GL.GL_BLEND)
        GL.glUseProgram(self._program)
        GL.glBindVertexArray(self._vao)
        GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)

    def release(self) -> None:
        """Delete what was made. Safe to call twice."""
        if not self._program:
            return
        GL.glDeleteFramebuffers(1, [self.fbo])
        GL.glDeleteTextures(2, [self._frame, self._packed])
        GL.glDeleteBuffers(1, [self._vbo])
        GL.glDeleteVertexArrays(1, [self._vao])
        GL.glDeleteProgram(self._program)
        self._program = 0


class YuyvReadback:
    """AsyncReadback's calls, order and guarantees (render/gl/readback.py) for frames
    packed by a YuyvPass: request() packs the bound read framebuffer's frame and queues
    the packed bytes' readback; collect() returns (frame, tag) with `frame` an
    H×W×2 uint8 view, top row first, of Y0 U Y1 V bytes (pyvirtualcam's YUYV, PyAV's
    yuyv422), one array reused by every collect. width×height×2 bytes a frame cross to
    the host: half of RGBA's.

    Invariant beyond AsyncReadback's: request() leaves the framebuffers bound for drawing
    and reading, and the viewport, as they were.
    """

    def __init__(self, width: int, height: int, background: tuple[int, int, int]) -> None:
        self.width, self.height = width, height
        self.yuyv = YuyvPass(width, height, background)
        self._readback = AsyncReadback(width // 2, height)
        self.nbytes = self._readback.nbytes

    def request(self, tag=None) -> None:
        with _bindings_kept():
            self.yuyv.pack()
            self._readback.request(tag)

    def collect(self) -> tuple[np.ndarray, object] | None:
        return self._frame(self._readback.collect())

    def collect_newest(self) -> tuple[np.ndarray, object] | None:
        return self._frame(self._readback.collect_newest())

    def _frame(self, got) -> tuple[np.ndarray, object] | None:
        if got is None:
            return None
        texels, tag = got
        # Splits each 4-byte texel in two pixels' 2 bytes: a view (the rows keep their
        # reversed stride), no copy.
        return texels.reshape(self.height, self.width, 2), tag

    def stats(self) -> dict:
        return self._readback.stats()

    def release(self) -> None:
        """Delete the pass's and the readback's GL objects. Safe to call twice."""
        self._readback.release()
        self.yuyv.release()
