"""The YUYV pass (render/gl/yuv_pack.py) on a real Mesa context under Xvfb: its bytes against
BT.601's textbook levels (worked out here by hand) and against yuv_pack's numpy reference of
the same conversion applied to the RGBA we read back of the same frame, and its readback in
the frame feed's order.

The bound on every comparison, 1 level: the reference rounds the exact value to the
nearest level; GL computes in 32-bit floats (off by ~1e-5 of a level) and then converts
each float to 8 bits as one of the two integers nearest to it, nearest preferred but
not required (OpenGL's conversion to normalized fixed point). So a byte may come out
one level off, never more; a wrong coefficient, a swapped U and V, a pair made of the
wrong pixels or flipped rows is off by far more (tens of levels on these frames).
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest

from render.gl.yuv_pack import yuyv_reference
from tests.harness.yuyv import YUYV_TOLERANCE, worst_difference

pytestmark = pytest.mark.display

DARK = (32, 35, 42)   # the app's default solid background


@contextmanager
def framebuffer_holding(frame: np.ndarray):
    """A framebuffer holding `frame` (H×W×4 uint8, top row first), bound for reading,
    in the current context."""
    from OpenGL import GL

    h, w = frame.shape[:2]
    texture = int(GL.glGenTextures(1))
    GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    # GL's row 0 is the bottom one.
    GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, w, h, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE,
                    np.ascontiguousarray(frame[::-1]))
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    fbo = int(GL.glGenFramebuffers(1))
    GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
    GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D,
                              texture, 0)
    assert GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER) == GL.GL_FRAMEBUFFER_COMPLETE
    try:
        yield
    finally:
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
        GL.glDeleteFramebuffers(1, [fbo])
        GL.glDeleteTextures(1, [texture])


def packed(frame: np.ndarray, background: tuple[int, int, int]) -> np.ndarray:
    """The pass's bytes for `frame` as H×W×2, read at once from its framebuffer."""
    from render.gl.offscreen import OffscreenTarget
    from render.gl.readback import read_sync
    from render.gl.yuv_pack import YuyvPass

    h, w = frame.shape[:2]
    with OffscreenTarget(w, h), framebuffer_holding(frame):
        yuyv = YuyvPass(w, h, background)
        yuyv.pack()
        texels = read_sync(np.empty((h, w // 2, 4), np.uint8)).copy()
        yuyv.release()
        yuyv.release()
    return texels.reshape(h, w, 2)


def test_pixels_of_known_colours_give_bt601_limited_levels(qt_app):
    # Two rows, four pairs a row: (left, right) premultiplied RGBA over DARK.
    white, black = (255, 255, 255, 255), (0, 0, 0, 255)
    red, green, blue = (255, 0, 0, 255), (0, 255, 0, 255), (0, 0, 255, 255)
    clear, half = (0, 0, 0, 0), (100, 50, 0, 128)
    frame = np.array([[white, black, red, red, green, blue, clear, half],
                      [black, white, clear, clear, blue, green, half, clear]], np.uint8)
    got = packed(frame, DARK)
    # Bytes Y0 U Y1 V per pair. The textbook BT.601 levels: white 235/128/128, black
    # 16/128/128, red 81/90/240 (81.48, 90.20), green 145/54/34 (144.55, 53.80, 34.21),
    # blue 41/240/110 (40.97, 109.79). Green beside blue: U of their mean 146.90, V 72.
    # DARK itself: Y 45.97, U 131.52, V 126.18. `half` over DARK is (115.94, 67.43,
    # 20.92): Y 81.81; with DARK beside it, U of their mean 115.95, V 139.40.
    expected = np.array([[235, 128, 16, 128, 81, 90, 81, 240, 145, 147, 41, 72, 46, 116, 82, 139],
                         [16, 128, 235, 128, 46, 132, 46, 126, 41, 147, 145, 72, 82, 116, 46, 139]],
                        np.uint8)
    assert worst_difference(got.reshape(2, 16), expected) <= YUYV_TOLERANCE, got.reshape(2, 16)


def test_random_premultiplied_frames_match_the_reference(qt_app):
    rng = np.random.default_rng(7)
    for (w, h), background in (((64, 36), DARK), ((10, 7), (200, 10, 255)), ((2, 1), (0, 255, 0))):
        alpha = rng.integers(0, 256, (h, w, 1))
        # Premultiplied: every channel at most its alpha, as the renderers draw.
        rgba = np.concatenate([rng.integers(0, 256, (h, w, 3)) * alpha // 255, alpha],
                              axis=2).astype(np.uint8)
        assert (worst_difference(packed(rgba, background), yuyv_reference(rgba, background))
                <= YUYV_TOLERANCE)


def test_odd_widths_are_refused_with_the_reason(qt_app):
    from render.gl.offscreen import OffscreenTarget
    from render.gl.yuv_pack import YuyvPass, YuyvReadback

    with OffscreenTarget(301, 203):
        for make in (YuyvPass, YuyvReadback):
            with pytest.raises(ValueError, match=r"width must be even; 301×203 is not"):
                make(301, 203, DARK)
        with pytest.raises(ValueError, match="whole pixels"):
            YuyvPass(0, 203, DARK)


@pytest.fixture(scope="module")
def rig():
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.rigs.sprite import load_sprite_rig

    return load_sprite_rig(DEFAULT_AVATAR_MANIFEST, 256)


def test_the_avatar_read_back_as_yuyv_matches_the_reference_of_its_rgba(qt_app, rig):
    """The bundled avatar over a half-transparent clear colour (every channel and alpha
    vary), read back as the frame feed does: the frame drawn a tick ago requested before
    the next is drawn. Each frame's YUYV equals the reference of that frame's own RGBA
    read back synchronously; the tags come out in order, the bindings stay."""
    from OpenGL import GL

    from pipeline.core.frames import MouthPose
    from render.gl.offscreen import OffscreenTarget
    from render.gl.readback import read_sync
    from render.gl.sprite_renderer import SpriteGLRenderer
    from render.gl.yuv_pack import YuyvReadback

    # An even width that is no multiple of 4 or 8, an odd height: no padding anywhere.
    w, h = 302, 203
    with OffscreenTarget(w, h) as target:
        renderer = SpriteGLRenderer(clear_color=(0.2, 0.4, 0.9, 0.5))
        renderer.initialize()
        renderer.set_rig(rig)
        renderer.resize(w, h)
        readback = YuyvReadback(w, h, DARK)
        assert readback.nbytes == w * h * 2     # RGBA's would be w * h * 4
        expected, got_tags, arrays = {}, [], []
        for k in range(6):
            if k:
                target.bind()
                GL.glViewport(3, 4, 50, 60)     # some caller's viewport: kept
                readback.request(k - 1)
                assert int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING)) == target.fbo
                assert int(GL.glGetIntegerv(GL.GL_READ_FRAMEBUFFER_BINDING)) == target.fbo
                assert [int(v) for v in GL.glGetIntegerv(GL.GL_VIEWPORT)] == [3, 4, 50, 60]
                target.bind()
            renderer.draw(MouthPose(k % 15, (k * 7 + 3) % 15, (k % 5) / 4, 0.5),
                          blink=(k % 3) / 2, breath=k / 10)
            expected[k] = yuyv_reference(read_sync(np.empty((h, w, 4), np.uint8)), DARK)
            got = readback.collect()
            if got is not None:
                frame, tag = got
                assert frame.shape == (h, w, 2) and frame.dtype == np.uint8
                assert worst_difference(frame, expected[tag]) <= YUYV_TOLERANCE, f"frame {tag}"
                got_tags.append(tag)
                arrays.append(frame)
        assert got_tags == list(range(5))
        # One array under every frame: nothing allocated per frame.
        assert all(np.shares_memory(arrays[0], a) for a in arrays[1:])
        # The frames differ, so matching is not one frame matched five times.
        assert worst_difference(expected[0], expected[1]) > 10
        assert readback.stats()["collected"] == 5
        readback.release()
        readback.release()
        renderer.release()
