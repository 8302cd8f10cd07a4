"""The offscreen frame feed for the browser source and virtual camera, for real: Qt + Mesa
GL under Xvfb, the bundled avatar, a media clock that runs with real time."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.harness.avatar_window import WINDOW_SIZE, image_pixels, show_drawn

pytestmark = pytest.mark.display


def _run(qt_app, seconds: float, until=None) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not (until and until()):
        qt_app.processEvents()
        time.sleep(0.001)


@pytest.fixture()
def rig(qt_app):
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.rigs.loader import load_avatar_rig

    return load_avatar_rig(DEFAULT_AVATAR_MANIFEST)


def test_the_feed_delivers_the_same_picture_as_the_avatar_window(qt_app, rig):
    from render.outputs.avatar_window import AvatarWindow
    from render.outputs.frame_feed import FrameFeed

    feed = FrameFeed(*WINDOW_SIZE, 60.0)
    feed.set_idle_motion(blinking=False, breathing=False)
    feed.set_rig(rig)
    got = []
    feed.sinks.append(lambda pixels, media_time: got.append(pixels.copy()))
    window = AvatarWindow(WINDOW_SIZE)
    window.set_idle_motion(blinking=False, breathing=False)
    window.set_rig(rig)
    show_drawn(qt_app, window)
    feed.start()
    try:
        _run(qt_app, 5, until=lambda: len(got) >= 3)
        assert len(got) >= 3, "the feed delivered no frames"
        # Same rig, size, pose and transparent background, drawn by another context.
        assert np.array_equal(got[-1], image_pixels(window.grab_frame()))
        assert got[-1][0, 0, 3] == 0 and (got[-1][..., 3] == 255).any()
    finally:
        feed.stop()
        window.shutdown()
        window.close()


def _deliveries(qt_app, rig, fps: float, extra_latency_s: float = 0.0,
                request_with_draw: bool | None = None):
    """(delivery monotonic times, frame media times) of a feed on a media clock that runs
    with real time from now, and that clock."""
    from pipeline.core.frames import MouthPose
    from render.outputs.frame_feed import FrameFeed

    start = time.monotonic()

    def media_time_at(t: float) -> float:
        return t - start

    feed = FrameFeed(*WINDOW_SIZE, fps, request_with_draw=request_with_draw)
    if request_with_draw is None:
        # llvmpipe: a read queued right after drawing would wait for it (FrameFeed._tick).
        assert feed.request_with_draw is False
    feed.set_rig(rig)
    feed.set_sources(lambda t0, period: MouthPose(int(t0 * 10) % 15, 0, 0.0, 0.5), media_time_at)
    feed.extra_latency_s = extra_latency_s
    deliveries = []
    feed.sinks.append(lambda pixels, media_time: deliveries.append((time.monotonic(), media_time)))
    feed.start()
    try:
        _run(qt_app, 10, until=lambda: len(deliveries) >= 40)
    finally:
        feed.stop()
    assert len(deliveries) >= 40
    assert feed.stats()["readback"]["collected"] >= 40
    # After the first frames: the latency estimate is a running average that settles.
    at, heard = np.array(deliveries[20:]).T
    return at, heard, media_time_at


@pytest.mark.parametrize("request_with_draw", [None, True], ids=["next_tick", "with_draw"])
def test_frames_carry_the_media_time_heard_when_they_are_delivered(qt_app, rig, request_with_draw):
    # Either order of requests (the GPU's, with the draw, runs here on llvmpipe too).
    at, heard, media_time_at = _deliveries(qt_app, rig, 30.0, request_with_draw=request_with_draw)
    # Ticks are a period apart, and each frame is made for what is heard as it is
    # delivered: the presenter learns the one-frame readback delay from the deliveries.
    # Bound: half a period, the frame grid's own rounding of the heard time.
    period = 1 / 30
    assert np.all(np.diff(heard) > 0)
    assert abs(np.median(np.diff(heard)) - period) < 0.1 * period
    assert np.median(np.abs(media_time_at(at) - heard)) < period / 2


def test_a_viewer_delay_after_delivery_moves_the_frames_media_time(qt_app, rig):
    # A page that paints 100 ms after it is handed a frame.
    at, heard, media_time_at = _deliveries(qt_app, rig, 30.0, extra_latency_s=0.1)
    # Frames are made for what is heard 100 ms after delivery, within a period (the
    # grid's rounding and the running average's remaining settling).
    lead = np.median(heard - media_time_at(at))
    assert abs(lead - 0.1) < 1 / 30


def test_a_hidden_avatar_fades_out_of_the_feed_and_comes_back(qt_app, rig):
    """The show/hide hotkey: the avatar fades out over HIDE_FADE_S, leaving the transparent
    background alone, and back in when shown again."""
    from render.outputs.frame_feed import FrameFeed
    from render.timing.avatar_motion import HIDE_FADE_S, AvatarMotion

    feed = FrameFeed(*WINDOW_SIZE, 60.0)
    feed.set_idle_motion(blinking=False, breathing=False)
    feed.set_rig(rig)
    motion = AvatarMotion(time.monotonic)  # motion strengths 0: only the hiding moves it
    feed.set_avatar_motion(motion)
    got = []
    feed.sinks.append(lambda pixels, media_time: got.append(pixels.copy()))
    feed.start()
    try:
        _run(qt_app, 5, until=lambda: len(got) >= 3)
        shown = got[-1]
        assert (shown[..., 3] == 255).any()
        motion.set_hidden(True)
        _run(qt_app, HIDE_FADE_S + 0.5)
        assert got[-1][..., 3].max() == 0  # nothing of the avatar is drawn
        motion.set_hidden(False)
        _run(qt_app, HIDE_FADE_S + 0.5)
        assert np.array_equal(got[-1], shown)
    finally:
        feed.stop()
