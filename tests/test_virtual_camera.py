"""The virtual camera (render/outputs/virtual_camera.py), everything up to the backend call
for real: a rendered frame composited and packed as YUYV on the GPU by the camera's
readback, through the worker and pyvirtualcam's own Camera to its backend's send; the
mailbox between the render thread and the camera's worker, its pacing, and pyvirtualcam's
own error on this machine turned into the user's instructions.

No v4l2loopback module can be loaded on these machines (the kernel is built without
loadable modules: CONFIG_MODULES is not set), so no /dev/videoN loopback device exists and
sending frames to a real device is untested here. Where the worker's sending path is
tested, a stand-in takes the device's place: RecordingBackend, registered with
pyvirtualcam's own register_backend mechanism, where the native v4l2loopback backend
would write to the device; RecordingCamera, for the mailbox tests, a test double kept to
what pyvirtualcam.Camera offers (send, close, device).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from render.outputs.background import CHROMA, SOLID, TRANSPARENT, Background, parse_colour
from render.outputs.virtual_camera import (
    EXTRA_MISSING,
    LINUX_SETUP,
    MACOS_OLD_SETUP,
    MACOS_SETUP,
    MACOS_UPGRADE,
    WINDOWS_BUSY,
    WINDOWS_SETUP,
    VirtualCamera,
    VirtualCameraError,
    background_rgb,
    explain_backend_error,
)
from tests.harness.waiting import until

DARK = Background(SOLID, parse_colour("#20232a"))   # the app's default: (32, 35, 42)


class RecordingCamera:
    """Keeps (frame, time) for each send; send waits for `gate` first when given, and
    sets `entered` as it starts."""

    device = "/dev/video-test"

    def __init__(self, gate: threading.Event | None = None, fail: bool = False) -> None:
        self.sent: list[tuple[np.ndarray, float]] = []
        self.gate = gate
        self.fail = fail
        self.entered = threading.Event()
        self.closed = False

    def __call__(self, width: int, height: int, fps: float) -> RecordingCamera:
        return self    # the factory: opening "the device" returns this recorder

    def send(self, frame: np.ndarray) -> None:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait()
        if self.fail:
            raise OSError("No such device")
        self.sent.append((frame.copy(), time.monotonic()))

    def close(self) -> None:
        self.closed = True


def numbered_frame(k: int, width: int = 8, height: int = 4) -> np.ndarray:
    """A YUYV frame whose first byte (the first pixel's Y) is k: what the camera got
    says which."""
    frame = np.full((height, width, 2), 128, np.uint8)
    frame[0, 0, 0] = k
    return frame


# -- the background and the frames -------------------------------------------------

def test_background_colours_a_camera_without_alpha_gets():
    assert background_rgb(DARK) == (32, 35, 42)
    assert background_rgb(Background(CHROMA, parse_colour("#00ff00"))) == (0, 255, 0)
    # A half-transparent solid colour over black: 32·128/255 = 16.06, 17.57, 21.08.
    assert background_rgb(Background(SOLID, parse_colour("#20232a80"))) == (16, 18, 21)
    # Transparent chose no colour: the premultiplied pixels as drawn, i.e. over black.
    assert background_rgb(Background(TRANSPARENT)) == (0, 0, 0)


class RecordingBackend:
    """A pyvirtualcam backend (pyvirtualcam.Backend's interface) keeping what it is given,
    in the place where the native v4l2loopback backend would write each frame to the
    device. Each one opened is appended to `opened`."""

    opened: list[RecordingBackend] = []

    def __init__(self, *, width: int, height: int, fps: float, fourcc: int, device, **kw):
        self.size, self.fourcc = (width, height), fourcc
        self.frames: list[np.ndarray] = []
        self.closed = False
        RecordingBackend.opened.append(self)

    def send(self, frame: np.ndarray) -> None:
        self.frames.append(frame.copy())

    def close(self) -> None:
        self.closed = True

    def device(self) -> str:
        return "/dev/video-recorded"

    def native_fourcc(self) -> int:
        return self.fourcc


@pytest.mark.display
def test_a_rendered_frame_reaches_pyvirtualcams_backend_as_yuyv_over_the_key(qt_app, monkeypatch):
    """The bundled avatar drawn on a transparent background, read back by the camera's
    readback as the frame feed does, offered, and sent by the worker through the real
    pyvirtualcam.Camera (the default factory) to its backend: the backend is opened for
    YUYV at the camera's size and gets width×height×2 bytes, the reference conversion of
    the frame's own RGBA over the key colour (tests/test_yuv_pack.py says why within 1
    level). Where nothing was drawn the bytes are the key's own levels."""
    import pyvirtualcam
    from pyvirtualcam.util import encode_fourcc

    from pipeline.core.frames import MouthPose
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.gl.offscreen import OffscreenTarget
    from render.gl.sprite_renderer import SpriteGLRenderer
    from render.gl.yuv_pack import yuyv_reference
    from render.rigs.sprite import load_sprite_rig
    from tests.harness.yuyv import YUYV_TOLERANCE, worst_difference

    # pyvirtualcam tries its backends in turn: v4l2loopback fails here (no device), then
    # this one opens.
    monkeypatch.setitem(pyvirtualcam.camera.BACKENDS, "recording", RecordingBackend)
    monkeypatch.setattr(RecordingBackend, "opened", [])
    w, h = 160, 120
    camera = VirtualCamera(w, h, 1000, Background(CHROMA, parse_colour("#00ff00")))
    with OffscreenTarget(w, h) as target:
        renderer = SpriteGLRenderer(clear_color=(0.0, 0.0, 0.0, 0.0))
        renderer.initialize()
        renderer.set_rig(load_sprite_rig(DEFAULT_AVATAR_MANIFEST, 256))
        renderer.resize(w, h)
        renderer.draw(MouthPose(10, 3, 0.4, 0.7), blink=0.3, breath=0.2)
        drawn = target.read_pixels()
        readback = camera.readback()
        readback.request(1.25)
        frame, media_time = readback.collect()
        camera.start()
        assert camera.stats()["device"] == "/dev/video-recorded"
        camera.send(frame, media_time)
        until(lambda: camera.sent == 1, 5.0, "the frame sent", poll=0.002)
        camera.stop()
        readback.release()
        renderer.release()
    [backend] = RecordingBackend.opened
    assert backend.size == (w, h) and backend.fourcc == encode_fourcc("YUY2")  # PixelFormat.YUYV
    assert backend.closed and len(backend.frames) == 1
    sent = backend.frames[0]
    assert sent.dtype == np.uint8 and sent.shape == (w * h * 2,)
    expected = yuyv_reference(drawn, (0, 255, 0))
    assert worst_difference(sent.reshape(h, w, 2), expected) <= YUYV_TOLERANCE
    alpha = drawn[..., 3]
    assert 0 < (alpha == 0).sum() and 0 < (alpha == 255).sum()   # both the avatar and around it
    # Pairs where nothing was drawn: green's BT.601 levels, Y 144.55, U 53.80, V 34.21.
    empty = (alpha[:, 0::2] == 0) & (alpha[:, 1::2] == 0)
    pairs = sent.reshape(h, w // 2, 4)[empty].astype(int)
    assert len(pairs) > 100 and np.abs(pairs - [145, 54, 145, 34]).max() <= YUYV_TOLERANCE
    assert camera.last_sent_media_time == 1.25


# -- the mailbox and the worker ------------------------------------------------------

def test_offer_never_blocks_while_the_camera_worker_is_stuck():
    gate = threading.Event()
    recorder = RecordingCamera(gate=gate)
    camera = VirtualCamera(8, 4, 1000, DARK, camera_factory=recorder)
    camera.start()
    camera.send(numbered_frame(0), 0.0)
    assert recorder.entered.wait(5), "the worker never took the first frame"
    durations = []

    def render_thread() -> None:
        for k in range(1, 101):
            started = time.perf_counter()
            camera.send(numbered_frame(k), k / 60)
            durations.append(time.perf_counter() - started)

    thread = threading.Thread(target=render_thread)
    thread.start()
    thread.join(10)
    # An offer waiting for the worker would wait forever here: the worker is parked in
    # send() until the gate opens.
    assert not thread.is_alive(), "offer() waited for the stuck camera"
    # Each offer copies 128 bytes and swaps two indices; 50 ms leaves room for the
    # scheduler on a shared 2-core machine, and is still far below "forever".
    assert len(durations) == 100 and max(durations) < 0.05, max(durations)
    assert camera.dropped == 99          # frames 1..99, each replaced by the next
    assert camera.offered - camera.sent - camera.dropped == 2   # 0 in send, 100 waiting
    gate.set()
    until(lambda: camera.sent == 2, 5.0, "the newest frame sent", poll=0.002)
    camera.stop()
    # The stuck frame, then the newest: nothing in between, nothing twice.
    assert [frame[0, 0, 0] for frame, _ in recorder.sent] == [0, 100]
    assert camera.offered == camera.sent + camera.dropped == 101
    assert recorder.closed


def test_worker_sends_at_most_fps_frames_a_second_newest_first():
    recorder = RecordingCamera()
    fps = 30
    camera = VirtualCamera(8, 4, fps, DARK, camera_factory=recorder)
    camera.start()
    assert camera.stats()["on"] and camera.stats()["device"] == "/dev/video-test"
    start = time.monotonic()
    k = 0
    while time.monotonic() - start < 0.5:     # a 60 fps render feeding a 30 fps camera
        k += 1
        camera.send(numbered_frame(k % 256), k / 60)
        time.sleep(1 / 60)
    camera.stop()
    elapsed = recorder.sent[-1][1] - recorder.sent[0][1]
    sent = [int(frame[0, 0, 0]) for frame, _ in recorder.sent]
    # One send per grid period at most: n sends span at least n - 1 periods (the first
    # lies anywhere in its period, so allow one period of slack on the span).
    assert len(sent) - 1 <= elapsed * fps + 1, (len(sent), elapsed)
    # A loaded machine may delay sends, but a 0.5 s run must send most of its 15.
    assert len(sent) >= 8, sent
    assert sent == sorted(set(sent)), "a frame sent twice or out of order"
    assert camera.offered == k
    assert camera.offered - camera.sent - camera.dropped in (0, 1)   # one left waiting
    status = camera.stats()
    assert not status["on"] and status["device"] is None and status["sent"] == len(sent)
    assert recorder.closed


def test_frames_of_another_size_or_format_are_refused_and_offers_while_off_ignored():
    recorder = RecordingCamera()
    camera = VirtualCamera(8, 4, 30, DARK, camera_factory=recorder)
    camera.send(numbered_frame(1), 0.0)
    assert camera.offered == 0
    camera.start()
    with pytest.raises(ValueError, match="render at the camera's size"):
        camera.send(numbered_frame(1, width=16, height=9), 0.0)
    # RGBA of the right size (what the camera took before it took YUYV) is not a frame.
    with pytest.raises(ValueError, match=r"the camera takes YUYV, uint8 \(4, 8, 2\)"):
        camera.send(np.zeros((4, 8, 4), np.uint8), 0.0)
    camera.stop()
    assert camera.offered == 0 and recorder.sent == []


def test_a_camera_of_odd_width_is_refused_with_the_reason():
    # YUYV carries two pixels' Y with one U and V: a row of an odd width cannot be packed.
    with pytest.raises(ValueError, match=r"width must be even; 1281×720 is not"):
        VirtualCamera(1281, 720, 30, DARK, camera_factory=RecordingCamera())


def test_a_device_failing_mid_stream_stops_the_camera_and_says_why():
    recorder = RecordingCamera(fail=True)
    camera = VirtualCamera(8, 4, 30, DARK, camera_factory=recorder)
    camera.start()
    camera.send(numbered_frame(1), 0.0)
    until(lambda: not camera.running, 5.0, "the camera stopped", poll=0.002)
    assert camera.stats()["error"] == "The virtual camera stopped: No such device"
    assert recorder.closed


# -- errors the user sees ------------------------------------------------------------

@pytest.mark.skipif(sys.platform != "linux", reason="v4l2loopback is Linux's backend")
def test_pyvirtualcam_without_v4l2loopback_gives_the_commands_to_set_it_up():
    """The real pyvirtualcam on this machine. No v4l2loopback module can be loaded on
    these machines (a kernel without loadable modules), so there is no loopback device
    and this error is what the user without one gets; sending frames to a real device
    is untested here."""
    camera = VirtualCamera(1280, 720, 30, DARK)
    with pytest.raises(VirtualCameraError) as caught:
        camera.start()
    # pyvirtualcam's own error is kept as the cause.
    assert "No v4l2 loopback device found" in str(caught.value.__cause__)
    message = caught.value.message
    assert message == LINUX_SETUP
    for command in ("sudo apt install v4l2loopback-dkms",
                    'sudo modprobe v4l2loopback exclusive_caps=1 card_label="Lipsync Studio"',
                    "/etc/modules-load.d/v4l2loopback.conf",
                    "/etc/modprobe.d/v4l2loopback.conf"):
        assert command in message
    assert not camera.running and camera.stats()["on"] is False


def test_without_the_vcam_extra_the_message_says_how_to_install_it():
    # pyvirtualcam made unimportable in a fresh interpreter, as in an install without
    # the extra.
    code = ("import sys; sys.modules['pyvirtualcam'] = None\n"
            "from render.outputs.background import Background\n"
            "from render.outputs.virtual_camera import VirtualCamera, VirtualCameraError\n"
            "try:\n    VirtualCamera(64, 48, 30, Background()).start()\n"
            "except VirtualCameraError as e:\n    print('ERR', e.message)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=os.getcwd())
    assert done.stdout.strip() == f"ERR {EXTRA_MISSING}", done.stderr
    assert EXTRA_MISSING == "Virtual camera needs the vcam extra: pip install 'lipsync-studio[vcam]'"


# pyvirtualcam's messages as its native backends raise them (pyvirtualcam/native_*/
# virtual_output.h; 'windows_obs', 'macos_obs_cmioextension', 'macos_obs_dal'), joined
# the way its Camera joins the errors of every backend it tried. They cannot be raised
# on Linux: this checks only which instruction each one leads to.
@pytest.mark.parametrize("system, text, message", [
    ("Windows", "'obs' backend: OBS Virtual Camera device not found! Did you install OBS?\n"
                "'unitycapture' backend: No camera registered. Did you install any camera?",
     WINDOWS_SETUP),
    ("Windows", "'obs' backend: virtual camera output could not be started\n"
                "'unitycapture' backend: No camera registered. Did you install any camera?",
     WINDOWS_BUSY),
    ("Darwin", "'obs' backend: OBS Virtual Camera is not installed in your system. Use the "
               "Virtual Camera function in OBS 30.0 or later to trigger the installation and "
               "activate the System Extension in System Settings. You may need to restart "
               "your machine after that. [Device not found]", MACOS_SETUP),
    ("Darwin", "'obs' backend: OBS Virtual Camera is not installed in your system. Use the "
               "Virtual Camera function in OBS to trigger installation.", MACOS_OLD_SETUP),
    ("Darwin", "'obs' backend: Your OBS Virtual Camera version is not supported. Upgrade to "
               "OBS 28 or higher. After upgrading, use the Virtual Camera function once in "
               "OBS to trigger installation of the virtual camera.", MACOS_UPGRADE),
])
def test_windows_and_macos_errors_name_what_to_install(system, text, message):
    assert explain_backend_error(RuntimeError(text), system).message == message
    # The same words on another system are not taken for that system's problem.
    assert explain_backend_error(RuntimeError(text), "Linux").message.startswith(
        "The virtual camera could not be opened: ")


def test_an_error_already_saying_what_to_do_is_passed_on():
    text = ("'v4l2loopback' backend: Could not access /dev/video0 due to missing permissions. "
            "Did you add your user to the 'video' group? Run 'usermod -a -G video myusername' "
            "and log out and in again.")
    assert explain_backend_error(RuntimeError(text), "Linux").message == (
        f"The virtual camera could not be opened: {text}")
