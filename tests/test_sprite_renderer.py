"""The sprite renderer (render/gl/sprite_renderer.py) on a real Mesa context under Xvfb: pixels
read back from an FBO."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core.frames import MouthPose
from pipeline.core.visemes import VISEME_INDEX
from tests.harness.synthetic_rig import EYES_BOX, H, W, layer, synthetic_rig

pytestmark = pytest.mark.display


@pytest.fixture()
def gl_target(qt_app):
    """A current 3.3 core context with a W×H RGBA8 framebuffer bound."""
    from render.gl.offscreen import OffscreenTarget

    with OffscreenTarget(W, H) as target:
        yield target


@pytest.fixture()
def renderer(gl_target):
    from render.gl.sprite_renderer import SpriteGLRenderer

    r = SpriteGLRenderer(clear_color=(0.0, 0.0, 0.0, 0.0))
    r.initialize()
    r.set_rig(synthetic_rig())
    r.resize(W, H)
    yield r
    r.release()


def pose(name_a: str, name_b: str | None = None, mix: float = 0.0) -> MouthPose:
    return MouthPose(VISEME_INDEX[name_a], VISEME_INDEX[name_b or name_a], mix, 0.5)


def render(r, p, blink=0.0, breath=0.0) -> np.ndarray:
    r.draw(p, blink, breath)
    return r.read_pixels()


def test_composite_is_not_blank_and_background_is_transparent(renderer):
    img = render(renderer, pose("sil"))
    assert img[0, 0].tolist() == [0, 0, 0, 0]
    assert img[60, 40].tolist() == [230, 190, 160, 255]          # base, top row first
    assert img[EYES_BOX][..., :3].min() == 255                   # open eyes over the base
    assert img[90, 80].tolist() == [90, 20, 20, 255]             # closed mouth line


def test_mouth_region_follows_the_pose_and_nothing_else_moves(renderer):
    closed = render(renderer, pose("sil"))
    open_ = render(renderer, pose("aa"))
    diff = np.any(closed != open_, axis=2)
    rows, cols = np.nonzero(diff)
    assert diff.sum() > 500
    assert rows.min() >= 80 and rows.max() < 100 and cols.min() >= 60 and cols.max() < 100
    assert open_[85, 65].tolist() == [20, 0, 0, 255]


def test_a_mid_blend_frame_shows_one_mouth_drawing_whole(renderer):
    """Ghosting: a cross-fade put a half-transparent open mouth over the closed line.
    Every blend shows exactly one drawing, the dominant one, switching at mix 0.5."""
    shut, wide = render(renderer, pose("sil")), render(renderer, pose("aa"))
    for mix in (0.1, 0.3, 0.49):
        assert np.array_equal(render(renderer, pose("sil", "aa", mix)), shut), mix
    for mix in (0.5, 0.7, 0.95):
        assert np.array_equal(render(renderer, pose("sil", "aa", mix)), wide), mix
    # Before, mix 0.5 drew the open mouth at half alpha over the base: (20 + 230) / 2.
    assert render(renderer, pose("sil", "aa", 0.5))[85, 65].tolist() == [20, 0, 0, 255]


def test_unmapped_viseme_shows_the_rest_mouth(renderer):
    assert np.array_equal(render(renderer, pose("kk")), render(renderer, pose("sil")))


def test_blink_changes_only_the_eyes(renderer):
    open_eyes = render(renderer, pose("sil"), blink=0.0)
    shut = render(renderer, pose("sil"), blink=1.0)
    diff = np.any(open_eyes != shut, axis=2)
    assert diff[EYES_BOX].all()
    diff[EYES_BOX] = False
    assert not diff.any()
    assert shut[35, 60].tolist() == [120, 60, 40, 255]


def test_breathing_moves_the_figure_up_a_little(renderer):
    rest = render(renderer, pose("sil"), breath=0.0)
    inhale = render(renderer, pose("sil"), breath=1.0)
    top = lambda img: int(np.nonzero(img[:, 80, 3])[0].min())  # noqa: E731
    assert top(inhale) < top(rest) <= top(inhale) + 3
    assert np.nonzero(inhale[:, 80, 3])[0].max() == np.nonzero(rest[:, 80, 3])[0].max()


def test_layers_are_drawn_only_where_they_have_coverage():
    from render.gl.sprite_renderer import coverage_rect

    rig = synthetic_rig()
    assert coverage_rect(rig.eyes_open, rig.eyes_closed) == (39 / W, 29 / H, 121 / W, 46 / H)
    assert coverage_rect(layer()) == (0.0, 0.0, 0.0, 0.0)


def test_aspect_ratio_is_kept_in_a_wide_viewport(renderer):
    renderer.resize(W, H // 2)          # twice as wide as the canvas relative to height
    img = render(renderer, pose("sil"))[: H // 2]
    cols = np.nonzero(img[..., 3].any(axis=0))[0]
    # Canvas 4:3 in an 8:3 viewport: drawn at half width, centred.
    assert cols.min() >= W // 4 and cols.max() < 3 * W // 4


def test_opaque_clear_colour(gl_target):
    from render.gl.sprite_renderer import SpriteGLRenderer

    r = SpriteGLRenderer(clear_color=(0.0, 1.0, 0.0, 1.0))
    r.initialize()
    r.set_rig(synthetic_rig())
    r.resize(W, H)
    assert render(r, pose("sil"))[0, 0].tolist() == [0, 255, 0, 255]
    r.release()


def test_bad_shader_reports_the_glsl_log(gl_target, tmp_path):
    from render.gl.sprite_renderer import SpriteGLRenderer, ShaderError

    (tmp_path / "sprite.vert").write_text("#version 330 core\nvoid main() { gl_Position = nope; }\n")
    (tmp_path / "sprite.frag").write_text("#version 330 core\nout vec4 c; void main() { c = vec4(1); }\n")
    with pytest.raises(ShaderError, match=r"sprite\.vert failed to compile:\n.*nope"):
        SpriteGLRenderer(shaders_dir=tmp_path).initialize()


def test_rig_with_wrong_image_size_is_refused(gl_target):
    from render.gl.sprite_renderer import SpriteGLRenderer

    rig = synthetic_rig()
    rig.eyes_closed = np.zeros((H, W + 1, 4), dtype=np.uint8)
    r = SpriteGLRenderer()
    r.initialize()
    with pytest.raises(ValueError, match="eyes_closed"):
        r.set_rig(rig)
    r.release()


def test_draws_the_default_avatar_rig(gl_target):
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.gl.sprite_renderer import SpriteGLRenderer
    from render.rigs.sprite import load_sprite_rig

    rig = load_sprite_rig(DEFAULT_AVATAR_MANIFEST, size=H)
    r = SpriteGLRenderer()
    r.initialize()
    r.set_rig(rig)
    r.resize(W, H)
    try:
        rest = render(r, pose("sil"))
        wide = render(r, pose("aa"))
        lips = render(r, pose("PP"))
        shut = render(r, pose("sil"), blink=1.0)
    finally:
        r.release()
    assert (rest[..., 3] == 255).mean() > 0.3                     # an opaque figure...
    assert rest[:, : (W - H) // 2 - 1, 3].max() == 0              # ...letterboxed in a wide view
    mouth = np.any(wide != lips, axis=2)
    eyes = np.any(rest != shut, axis=2)
    assert mouth.sum() > 20 and eyes.sum() > 20
    # The mouth moves below the eyes.
    assert np.nonzero(mouth)[0].mean() > np.nonzero(eyes)[0].mean() + 10


def test_each_texture_holds_only_its_layers_rectangle(gl_target):
    """The bundled avatar's textures hold each image over its layer's rectangle (7.2% of
    its 25 canvases at 512 px), not the whole canvas: what set_rig uploads at every avatar
    switch, per output, on the GUI thread."""
    from OpenGL import GL

    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.gl.sprite_renderer import SpriteGLRenderer, rig_images, sprite_layout
    from render.rigs.sprite import load_sprite_rig

    rig = load_sprite_rig(DEFAULT_AVATAR_MANIFEST, size=512)
    w, h = rig.canvas_size
    stored = sprite_layout(rig).stored_rects()
    r = SpriteGLRenderer()
    r.initialize()
    r.set_rig(rig)
    try:
        sizes = {}
        for name, texture in r._textures.items():
            GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
            sizes[name] = (GL.glGetTexLevelParameteriv(GL.GL_TEXTURE_2D, 0, GL.GL_TEXTURE_WIDTH),
                           GL.glGetTexLevelParameteriv(GL.GL_TEXTURE_2D, 0, GL.GL_TEXTURE_HEIGHT))
    finally:
        r.release()
    assert set(sizes) == set(stored) <= set(rig_images(rig))
    for name, (x0, y0, x1, y1) in stored.items():
        assert sizes[name] == (round((x1 - x0) * w), round((y1 - y0) * h)), name
    # Measured: 7.2% of the pixels of all 25 images; the whole canvases were 100%.
    assert sum(tw * th for tw, th in sizes.values()) < 0.08 * len(rig_images(rig)) * w * h


def test_premultiplying_is_exact_and_done_once_per_image():
    import gc

    from render.gl import sprite_renderer

    # Every colour at every alpha: round(c·a/255), as the GL path and the kernels expect.
    c, a = np.meshgrid(np.arange(256), np.arange(256))
    image = np.stack([c, c, c, a], axis=-1).astype(np.uint8)
    made = sprite_renderer.premultiplied(image)
    assert np.array_equal(made[..., 0], np.floor(c * a / 255 + 0.5).astype(np.uint8))
    assert np.array_equal(made[..., 3], a)
    # Each output of the app asks for the same rig's images: one copy, read-only, for all.
    assert sprite_renderer.premultiplied(image) is made and not made.flags.writeable
    # Its visible box, found with it, is kept as long as it too (sprite_layout asks for it
    # at every set_rig).
    assert sprite_renderer.image_box(image) == (slice(1, 256), slice(0, 256))
    entries = len(sprite_renderer._PREMULTIPLIED), len(sprite_renderer._BOXES)
    del image
    gc.collect()
    assert (len(sprite_renderer._PREMULTIPLIED), len(sprite_renderer._BOXES)) == (
        entries[0] - 1, entries[1] - 1)


@pytest.mark.parametrize("transparent_share", [0.0, 0.7, 0.999, 1.0])
def test_premultiplied_is_round_c_times_a_over_255_outside_the_visible_box_too(transparent_share):
    # Only the box around the visible pixels is computed; a straight-alpha image may hold
    # any colour under alpha 0, which must come out 0.
    from render.gl.sprite_renderer import premultiplied

    rng = np.random.default_rng(7)
    image = rng.integers(0, 256, (41, 67, 4), dtype=np.uint8)
    image[..., 3][rng.random((41, 67)) < transparent_share] = 0
    out = premultiplied(image)
    alpha = image[..., 3:4].astype(np.uint32)
    expected = ((image[..., :3].astype(np.uint32) * alpha * 2 + 255) // 510).astype(np.uint8)
    np.testing.assert_array_equal(out[..., :3], expected)
    np.testing.assert_array_equal(out[..., 3], image[..., 3])
    assert not out.flags.writeable
