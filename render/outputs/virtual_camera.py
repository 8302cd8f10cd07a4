"""The avatar as a webcam for other programs (OBS, Zoom, Discord), through pyvirtualcam:
v4l2loopback on Linux, OBS's virtual camera on Windows and macOS.

pyvirtualcam is GPL-2.0 and optional (the `vcam` extra), so it is imported only when a
camera is opened; opening one without it, or without the system's virtual camera
device, raises VirtualCameraError with what the user has to do (the exact commands).

Threads: the render thread hands each frame to `send`, which copies it into a mailbox of
one frame (the newest wins; a frame replaced before the camera took it is counted as
dropped) and returns: it never waits for the camera. A worker thread owns the camera
from start() on: it takes the newest frame at most `fps` times a second and sends it.

Format: pyvirtualcam's YUYV (2 bytes a pixel, BT.601 limited range), made on the GPU:
the feed drawing the camera's frames reads them with the camera's readback()
(render/gl/yuv_pack.py YuyvReadback), which composites them over the background (the
cameras carry no alpha) and packs them as YUYV in a GL pass, so half of RGBA's bytes
cross to the host and the worker only copies and sends. pyvirtualcam then writes YUYV to
the v4l2loopback device as it is (Linux) or repacks it to NV12 (Windows) or UYVY (macOS)
in libyuv, no colour conversion. Its send keeps the GIL while it does so (its pybind11
binding does not release it), so during a send the render thread runs no Python; that
time could not be measured here (no device).

Where the GPU is the CPU (Mesa's llvmpipe) the pass costs the render thread more than it
saves: llvmpipe rasterises it inside the readback's request, 10.6 ms a tick at 1280×720
and 17.4 at 1920×1080 (P50) against RGBA's 1.7 and 3.4, where the worker's compositing
it replaced took 4.8 and 13.4 ms a sent frame (2-core VM:
bench/results/yuv_readback_vm_2core_epyc_llvmpipe.json and readback.json). On a GPU the
pass only queues.
"""

from __future__ import annotations

import math
import platform
import threading
import time
from collections.abc import Callable

import numpy as np

from render.gl.yuv_pack import YuyvReadback, check_yuyv_size
from render.outputs.background import TRANSPARENT, Background

EXTRA_MISSING = "Virtual camera needs the vcam extra: pip install 'lipsync-studio[vcam]'"

LINUX_SETUP = (
    "The virtual camera needs the v4l2loopback kernel module, which is not loaded. "
    "Install it and load it with:\n"
    "  sudo apt install v4l2loopback-dkms\n"
    "  sudo modprobe v4l2loopback exclusive_caps=1 card_label=\"Lipsync Studio\"\n"
    "To have it at every start:\n"
    "  echo v4l2loopback | sudo tee /etc/modules-load.d/v4l2loopback.conf\n"
    "  echo 'options v4l2loopback exclusive_caps=1 card_label=\"Lipsync Studio\"' "
    "| sudo tee /etc/modprobe.d/v4l2loopback.conf\n"
    "With Secure Boot on, the module must be signed first (DKMS asks for a key at install "
    "and you enrol it at the next boot); 'Key was rejected by service' means it is not.")

WINDOWS_SETUP = ("The virtual camera sends to OBS Studio's virtual camera, which is not "
                 "installed: install OBS Studio 26 or newer from https://obsproject.com "
                 "(OBS itself need not be running).")
WINDOWS_BUSY = ("OBS's virtual camera could not be started: it takes one sender at a time, "
                "so stop OBS's own virtual camera (Stop Virtual Camera) and try again.")
MACOS_SETUP = ("The virtual camera sends to OBS Studio's virtual camera, which is not "
               "installed: install OBS Studio 30 or newer from https://obsproject.com, "
               "click Start Virtual Camera once and allow its system extension in System "
               "Settings → Privacy & Security (a restart may be needed).")
MACOS_OLD_SETUP = ("The virtual camera sends to OBS Studio's virtual camera, which is not "
                   "installed: install OBS Studio 28 or newer from https://obsproject.com, "
                   "click Start Virtual Camera once, then Stop Virtual Camera, and quit OBS.")
MACOS_UPGRADE = ("The installed OBS virtual camera is too old: upgrade OBS Studio to 28 or "
                 "newer, then click Start Virtual Camera in OBS once to install the new one.")

# pyvirtualcam's own messages (its native backends, 0.12 to 0.15) → what to tell the user.
# One Camera() tries every backend of the system and joins their messages, so each is
# looked for anywhere in the text.
_KNOWN_ERRORS: tuple[tuple[str, str, str], ...] = (
    ("Linux", "No v4l2 loopback device found", LINUX_SETUP),
    ("Windows", "OBS Virtual Camera device not found", WINDOWS_SETUP),
    ("Windows", "virtual camera output could not be started", WINDOWS_BUSY),
    ("Darwin", "Use the Virtual Camera function in OBS 30.0 or later", MACOS_SETUP),
    ("Darwin", "Use the Virtual Camera function in OBS to trigger installation", MACOS_OLD_SETUP),
    ("Darwin", "Your OBS Virtual Camera version is not supported", MACOS_UPGRADE),
)


class VirtualCameraError(RuntimeError):
    """A virtual camera that cannot be opened or used; the message is for the user."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def explain_backend_error(error: Exception, system: str | None = None) -> VirtualCameraError:
    """The user's message for an error pyvirtualcam raised opening a camera on `system`
    (platform.system()'s name; this machine's by default): the setup it lacks, with the
    commands, or pyvirtualcam's own words where they already say what to do (e.g. a
    missing permission on /dev/videoN)."""
    system = system or platform.system()
    text = str(error)
    for where, marker, message in _KNOWN_ERRORS:
        if where == system and marker in text:
            return VirtualCameraError(message)
    return VirtualCameraError(f"The virtual camera could not be opened: {text}")


def open_pyvirtualcam(width: int, height: int, fps: float):
    """A pyvirtualcam.Camera taking width×height YUYV frames, the system's first virtual
    camera device; VirtualCameraError with the user's message if there is none."""
    try:
        import pyvirtualcam
    except ImportError:
        raise VirtualCameraError(EXTRA_MISSING) from None
    try:
        return pyvirtualcam.Camera(width, height, fps, fmt=pyvirtualcam.PixelFormat.YUYV)
    except (RuntimeError, ValueError) as error:
        raise explain_backend_error(error) from error


def background_rgb(background: Background) -> tuple[int, int, int]:
    """The 8-bit colour a camera without alpha shows behind the avatar: a solid or key
    colour with its own alpha applied over black; black for TRANSPARENT (no colour was
    chosen: the pixels as drawn, premultiplied, are the avatar over black)."""
    if background.mode == TRANSPARENT:
        return (0, 0, 0)
    r, g, b, a = background.colour
    return tuple(int(round(c * a * 255)) for c in (r, g, b))  # type: ignore[return-value]


CameraFactory = Callable[[int, int, float], object]


class VirtualCamera:
    """Sends the frames offered to it to a virtual camera, at most `fps` a second.

    `camera_factory(width, height, fps)` opens the device: by default pyvirtualcam's
    first virtual camera taking YUYV frames (an object with send(yuyv), close() and a
    `device` name). Frames are width×height YUYV over the background as readback()
    makes them: render at the camera's size, an even width.

    Invariants: send() never waits for the worker (it copies into the mailbox under a
    lock held only to swap two indices); frames are sent in send order, each at most
    once, the newest one offered at each send, as offered (the worker changes no byte);
    offered == sent + dropped + the frames in flight (0 to 2: one waiting in the
    mailbox, one being sent).
    """

    def __init__(self, width: int, height: int, fps: float, background: Background, *,
                 camera_factory: CameraFactory = open_pyvirtualcam,
                 now: Callable[[], float] = time.monotonic) -> None:
        check_yuyv_size(width, height)
        self.width, self.height, self.fps = width, height, fps
        self.period = 1.0 / fps
        self.background_rgb = background_rgb(background)
        self._factory = camera_factory
        self._now = now
        # Three frames: one the render thread writes, one waiting (the newest), one the
        # worker sends. Only the indices move between threads.
        self._buffers = [np.zeros((height, width, 2), np.uint8) for _ in range(3)]
        self._times = [float("nan")] * 3
        self._write, self._ready, self._sending = 0, 1, 2
        self._fresh = False
        self._lock = threading.Condition(threading.Lock())
        self._stopping = False
        self._camera = None
        self._thread: threading.Thread | None = None
        self.device: str | None = None
        self.error: str | None = None
        self.offered = 0
        self.sent = 0
        self.dropped = 0
        self.last_sent_media_time = float("nan")

    @property
    def running(self) -> bool:
        """Whether frames offered now are sent (started, not stopped, not failed)."""
        return self._thread is not None and self._thread.is_alive() and not self._stopping

    def start(self) -> None:
        """Open the camera (on this thread, so VirtualCameraError is raised here) and
        start the worker, which from then on alone uses it."""
        if self.running:
            return
        if self._thread is not None and self._thread.is_alive():
            raise VirtualCameraError("The virtual camera is still closing: its device has "
                                     "not answered since it was stopped. Try again shortly.")
        self._camera = self._factory(self.width, self.height, self.fps)
        self.device = str(self._camera.device)
        self.error = None
        self._stopping = False
        self._fresh = False
        self._thread = threading.Thread(target=self._run, name="virtual-camera", daemon=True)
        self._thread.start()

    def readback(self) -> YuyvReadback:
        """What the feed drawing this camera's frames reads them back with (in its GL
        context, current): composited over the camera's background and packed as YUYV
        on the GPU, at the camera's size; its frames are what send() takes."""
        return YuyvReadback(self.width, self.height, self.background_rgb)

    def send(self, yuyv: np.ndarray, media_time: float) -> None:
        """Hand over a frame: H×W×2 uint8 YUYV, top row first, any strides (e.g.
        readback()'s view; it is copied, so it may be reused at once). Returns without
        waiting; ignored while the camera is off."""
        if not self.running:
            return
        if yuyv.shape != (self.height, self.width, 2) or yuyv.dtype != np.uint8:
            raise ValueError(f"frame is {yuyv.dtype} {yuyv.shape}; the camera takes YUYV, "
                             f"uint8 {(self.height, self.width, 2)}, as its readback() gives "
                             "it: render at the camera's size")
        write = self._write
        np.copyto(self._buffers[write], yuyv)
        self._times[write] = media_time
        with self._lock:
            if self._fresh:
                self.dropped += 1
            self._write, self._ready = self._ready, write
            self._fresh = True
            self.offered += 1
            self._lock.notify()

    def stats(self) -> dict:
        """On or off, the device sent to, and the frame counts: `dropped` are frames
        replaced by a newer one before the camera took them (half of them by design when
        a 60 fps render feeds a 30 fps camera). `error` says why a running camera
        stopped (None if it did not fail)."""
        return {"on": self.running, "device": self.device if self.running else None,
                "offered": self.offered, "sent": self.sent, "dropped": self.dropped,
                "last_sent_media_time": self.last_sent_media_time, "error": self.error}

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the worker and close the camera. A worker stuck in the backend longer
        than `timeout` closes it when the backend returns; start() refuses until then."""
        if self._thread is None:
            return
        with self._lock:
            self._stopping = True
            self._lock.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        camera = self._camera
        due = self._now()
        try:
            while True:
                with self._lock:
                    while not self._fresh and not self._stopping:
                        self._lock.wait()
                    if self._stopping:
                        return
                wait = due - self._now()
                if wait > 0:
                    # Frames offered meanwhile replace the waiting one: the newest is sent.
                    with self._lock:
                        if self._lock.wait_for(lambda: self._stopping, wait):
                            return
                with self._lock:
                    self._ready, self._sending = self._sending, self._ready
                    self._fresh = False
                sending = self._sending
                camera.send(self._buffers[sending])
                self.sent += 1
                self.last_sent_media_time = self._times[sending]
                # On a grid of periods from the worker's start: at most one frame a period.
                # Grid points missed in a stall are skipped, not made up in a burst.
                due += self.period
                late = self._now() - due
                if late > 0:
                    due += math.ceil(late / self.period) * self.period
        except Exception as error:  # the device went away, or the backend refused a frame
            self.error = f"The virtual camera stopped: {error}"
        finally:
            camera.close()
