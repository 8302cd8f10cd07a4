"""The avatar-only window for OBS, for real: Qt + Mesa GL under Xvfb, the bundled avatar
(an SVG rig, so its outline is antialiased: partly covered pixels exist to check)."""

from __future__ import annotations

import subprocess
import time

import numpy as np
import pytest

from tests.harness.avatar_window import WINDOW_SIZE, image_pixels, show_drawn

pytestmark = pytest.mark.display


def _drawn(qt_app, window, also=lambda: True) -> None:
    """Until the window has drawn a few more frames (and `also()` holds)."""
    drawn = window.draws
    end = time.monotonic() + 10
    while time.monotonic() < end and not (window.draws > drawn + 2 and also()):
        qt_app.processEvents()
        time.sleep(0.002)
    assert window.draws > drawn + 2 and also(), "the window did not draw on"


@pytest.fixture()
def avatar_window(qt_app):
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.outputs.avatar_window import AvatarWindow
    from render.rigs.loader import load_avatar_rig

    made = []

    def make(**kwargs):
        window = AvatarWindow(WINDOW_SIZE, **kwargs)
        window.set_idle_motion(blinking=False, breathing=False)
        window.set_rig(load_avatar_rig(DEFAULT_AVATAR_MANIFEST))
        show_drawn(qt_app, window)
        made.append(window)
        return window

    yield make
    for window in made:
        window.shutdown()
        window.close()
        window.deleteLater()
    qt_app.processEvents()


def test_the_window_is_titled_for_obs_and_has_an_alpha_visual(avatar_window):
    from render.outputs.avatar_window import TITLE

    window = avatar_window()
    assert window.title() == TITLE == "Lipsync Studio — Avatar"
    info = subprocess.run(["xwininfo", "-id", str(int(window.winId()))],
                          capture_output=True, text=True, check=True).stdout
    # Depth 32 is the ARGB visual: without it X drops the alpha OBS's capture would read.
    assert "Depth: 32" in info, info
    assert f"Width: {WINDOW_SIZE[0]}" in info and f"Height: {WINDOW_SIZE[1]}" in info


def test_transparent_solid_and_chroma_backgrounds(avatar_window):
    from render.outputs.background import CHROMA, SOLID, Background, parse_colour

    window = avatar_window()
    clear = image_pixels(window.grab_frame()).astype(np.int32)
    alpha = clear[..., 3]
    assert alpha[0, 0] == 0 and alpha[-1, -1] == 0, "corners must be transparent"
    assert (alpha == 255).any(), "the avatar must be drawn"
    edge = (alpha > 0) & (alpha < 255)
    assert edge.sum() > 50, "an SVG outline has antialiased pixels"
    # Premultiplied: no channel above its alpha.
    assert (clear[..., :3] <= alpha[..., None]).all()

    window.set_background(Background(SOLID, parse_colour("#336699")))
    solid = image_pixels(window.grab_frame()).astype(np.int32)
    assert tuple(solid[0, 0]) == (0x33, 0x66, 0x99, 255)
    assert (solid[..., 3] == 255).all()

    key = parse_colour("#00ff00")
    window.set_background(Background(CHROMA, key))
    chroma = image_pixels(window.grab_frame()).astype(np.int32)
    assert (chroma[..., 3] == 255).all()
    # Only two kinds of pixel, so that OBS's keyer has no blend to leave as a fringe: at
    # least half covered, the avatar's own colour (un-premultiplied from the transparent
    # frame; 1 level for the shader's rounding, 2 more for 8-bit alpha's at half
    # coverage), else the key, except the filled key pixels (shaders/chroma.frag).
    half = alpha >= 128
    own = (clear[..., :3] * 255 + alpha[..., None] // 2) // np.maximum(alpha, 1)[..., None]
    assert np.abs(chroma[half][:, :3] - own[half]).max() <= 3
    keyed = ~half & (chroma[..., :3] == (0, 255, 0)).all(axis=-1)
    filled = ~half & ~keyed
    # A filled pixel is the colour of its covered neighbours, nothing of the key in it.
    for y, x in zip(*np.nonzero(filled)):
        around = own[max(0, y - 1):y + 2, max(0, x - 1):x + 2][half[max(0, y - 1):y + 2, max(0, x - 1):x + 2]]
        assert ((around.min(axis=0) - 3 <= chroma[y, x, :3]) & (chroma[y, x, :3] <= around.max(axis=0) + 3)).all()
    # Only gaps and notches are filled, not the whole outline: measured 162 of the 748
    # partly covered pixels at 320x240, 6 of them wholly uncovered.
    assert filled.sum() < edge.sum() / 2, f"{filled.sum()} of {edge.sum()} edge pixels filled"


def test_borderless_and_always_on_top(avatar_window):
    from PySide6.QtCore import Qt

    window = avatar_window(borderless=True, on_top=True)
    flags = window.flags()
    assert flags & Qt.WindowType.FramelessWindowHint
    assert flags & Qt.WindowType.WindowStaysOnTopHint
    window.set_window_flags(False, False)
    assert not window.flags() & Qt.WindowType.FramelessWindowHint
    assert window.isVisible()


def test_it_shows_the_same_avatar_as_the_main_view(avatar_window, qt_app):
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.outputs.avatar_view import AvatarView
    from render.rigs.loader import load_avatar_rig

    window = avatar_window()
    view = AvatarView()
    view.set_idle_motion(blinking=False, breathing=False)
    view.set_rig(load_avatar_rig(DEFAULT_AVATAR_MANIFEST))
    view.resize(*WINDOW_SIZE)
    view.show()
    end = time.monotonic() + 10
    while time.monotonic() < end and view._draws < 3:
        qt_app.processEvents()
        time.sleep(0.002)
    try:
        ours, theirs = image_pixels(window.grab_frame()), image_pixels(view.grab())
        # Same rig, size, pose and background: the same pixels, widgets or not.
        assert ours.shape == theirs.shape and np.array_equal(ours, theirs)
    finally:
        view.shutdown()
        view.close()
        view.deleteLater()


def test_a_caption_is_outlined_letters_not_a_box(avatar_window, qt_app, tmp_path):
    from PIL import Image

    from render.outputs.background import CHROMA, Background, parse_colour

    window = avatar_window(background=Background(CHROMA, parse_colour("#00ff00")))
    window.set_caption("Papa made a map of five big boats.")
    drawn = window.draws
    end = time.monotonic() + 5
    while time.monotonic() < end and window.draws < drawn + 3:
        qt_app.processEvents()
        time.sleep(0.002)
    shot = tmp_path / "window.png"
    # What is on screen (the caption is painted over the frame, not into grab_frame's).
    subprocess.run(["import", "-window", str(int(window.winId())), str(shot)], check=True)
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    strip = pixels[int(WINDOW_SIZE[1] * 0.8):]
    white = (strip > 235).all(axis=-1)
    dark = (strip < 40).all(axis=-1)
    rows, cols = np.nonzero(white)
    assert len(rows) > 100, "no caption letters on screen"
    box = (slice(rows.min(), rows.max() + 1), slice(cols.min(), cols.max() + 1))
    # Letters in an outline leave the background between them: a filled box (Qt's GL
    # paint engine without a stencil buffer fills a path's bounding box) would not.
    covered = (white[box] | dark[box]).mean()
    assert covered < 0.75, f"{covered:.0%} of the caption's box is letters or outline"
    assert dark[box].mean() > 0.05, "the letters need their outline"


def test_a_viewer_delay_makes_frames_for_what_is_heard_that_much_later(avatar_window, qt_app):
    """OBS samples the window on its own frame grid: with viewer_delay_s the presenter
    takes each swap as seen that much later, and picks frames for that time."""
    from pipeline.core.frames import MouthPose

    start = time.monotonic()
    made = []
    for delay in (0.0, 0.05):
        window = avatar_window()
        window.viewer_delay_s = delay
        window.set_sources(lambda t0, period: MouthPose(0, 0, 0.0, 0.5), lambda t: t - start)
        made.append(window)
    end = time.monotonic() + 3
    while time.monotonic() < end:
        qt_app.processEvents()
        time.sleep(0.001)
    leads = []
    for window in made:
        log = window.presenter.presentation_log()
        log = log[len(log) // 2:]  # after the latency estimate settled
        assert len(log) > 30
        leads.append(float(np.median(log["predicted"] - log["tick"])))
    # 50 ms more between tick and predicted presentation; both windows are alike, so
    # their own swap latencies cancel (bound: a few ms of difference between them, as
    # the two share the machine's one GL rasteriser).
    assert abs((leads[1] - leads[0]) - 0.05) < 0.008, leads


def test_a_photo_avatar_resized_while_another_context_is_current_draws_on(avatar_window, qt_app):
    """Qt resizes a window with no context of its own current: a photo rig's mouth frame
    (a framebuffer per window, remade at the new size) must still be made in the
    window's context, and another context's framebuffer left alone. Found by the soak
    (bench/soak.py): the main window's view resized by a message appearing while the
    browser source's offscreen context was current, and from then on every frame of
    both failed with GL_INVALID_OPERATION."""
    from PySide6.QtCore import QEvent, QObject

    from render.gl.offscreen import OffscreenTarget
    from tests.harness.drawn_portrait import drawn_portrait

    class OtherFirst(QObject):
        """Makes the other context current as the resize event comes: as the frame
        feed's tick leaves its own current, between the window's paints."""

        def eventFilter(self, watched, event) -> bool:
            if event.type() == QEvent.Type.Resize:
                other.make_current()
            return False

    rig = drawn_portrait()
    window = avatar_window()
    window.set_rig(rig)
    _drawn(qt_app, window)
    large = (2 * WINDOW_SIZE[0], 2 * WINDOW_SIZE[1])
    with OffscreenTarget(64, 64) as other:
        watch = OtherFirst()
        window.installEventFilter(watch)
        window.set_size(large)
        end = time.monotonic() + 10
        while time.monotonic() < end and window.renderer.viewport != large:
            qt_app.processEvents()
        window.removeEventFilter(watch)
        other.make_current()  # its framebuffer is still there, and still its own
        assert other.read_pixels().shape == (64, 64, 4)
    # The same pixels as a window made at that size: the mouth frame was made anew
    # for it, in its own context.
    fresh = avatar_window()
    fresh.set_rig(rig)
    fresh.set_size(large)
    _drawn(qt_app, fresh, lambda: fresh.renderer.viewport == large)
    assert window.renderer.mouth_size == fresh.renderer.mouth_size
    assert np.array_equal(image_pixels(window.grab_frame()), image_pixels(fresh.grab_frame()))
