"""Session-wide real services (a display, JACK, Qt), and the fixtures several test modules
share (a real OBS, MediaPipe's landmarker, the astronaut photo rig, paths a user gets
wrong): tests ask for them by name; helpers that are not fixtures live in tests/harness/."""

from __future__ import annotations

import os

import pytest

from tests.harness.services import JackServer, Xvfb


@pytest.fixture(scope="session")
def x_display():
    """A real X server with Mesa GL; sets DISPLAY for the whole test session."""
    server = Xvfb()
    old = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = server.display
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    yield server.display
    server.stop()
    if old is None:
        os.environ.pop("DISPLAY", None)
    else:
        os.environ["DISPLAY"] = old


@pytest.fixture(scope="module")
def window_manager(x_display):
    """An EWMH window manager (openbox) on the test display, for the modules that run OBS
    (its window capture needs one); per module, so other tests see no window manager."""
    from tests.harness.obs import WindowManager

    wm = WindowManager(x_display)
    yield wm
    wm.stop()


@pytest.fixture(scope="session")
def jack_server():
    """A real JACK server (dummy driver, 48 kHz, 512-frame periods)."""
    from pipeline.audio.devices import (
        AudioUnavailable,
        portaudio_released,
        reinitialize_portaudio,
    )

    server = JackServer()
    # PortAudio enumerates host APIs once: re-initialise so it sees the new server, and
    # let go of it before the server stops (PortAudio's JACK layer asserts otherwise).
    # Both through audio_devices, which closes every stream first, after any close in
    # flight: terminating PortAudio under a stream still closing crashed the process.
    reinitialize_portaudio()
    yield server
    try:
        with portaudio_released():
            server.stop()
    except AudioUnavailable:
        server.stop()  # a stream that cannot close keeps PortAudio as it is
        raise


@pytest.fixture(scope="session")
def qt_app(x_display):
    """The one QApplication of the test session, on the Xvfb display."""
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(["lipsync-studio-tests"])
    yield app
    # Free Qt's X connection before the X server stops, or Qt aborts the process at exit.
    import shiboken6

    app.closeAllWindows()
    app.processEvents()
    shiboken6.delete(app)


@pytest.fixture
def output(jack_server):
    """The app's audio output, started on the JACK test server's playback device."""
    from pipeline.audio.output import AudioOutput

    out = AudioOutput("system")
    out.start()
    yield out
    out.close()


@pytest.fixture(scope="session", autouse=True)
def own_config_dir(tmp_path_factory):
    """The app's settings, tokens and avatars in a folder of the test session's, never the
    machine's own (the commands and windows read them: render takes the settings' avatar)."""
    folder = tmp_path_factory.mktemp("config-home")
    old = os.environ.get("LIPSYNC_STUDIO_CONFIG_DIR")
    os.environ["LIPSYNC_STUDIO_CONFIG_DIR"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("LIPSYNC_STUDIO_CONFIG_DIR", None)
    else:
        os.environ["LIPSYNC_STUDIO_CONFIG_DIR"] = old


@pytest.fixture(scope="module")
def harness_device(jack_server):
    """HARNESS_DEVICE (tests/harness/app_driver.py) is the JACK test server's, for playing
    and for capturing, and no device of the machine's own goes by that name too. The app's
    modules use it for every test (pytestmark's usefixtures)."""
    import sounddevice as sd

    from tests.harness.app_driver import HARNESS_DEVICE

    for kind in ("output", "input"):
        try:
            info = sd.query_devices(HARNESS_DEVICE, kind)
        except ValueError as exc:  # none, or several: sounddevice lists them
            pytest.skip(f"the JACK test server's {kind} {HARNESS_DEVICE!r} cannot be told "
                        f"from this machine's devices: {exc}")
        host = sd.query_hostapis(info["hostapi"])["name"]
        if "JACK" not in host:
            pytest.skip(f"{HARNESS_DEVICE!r} is this machine's {host} {kind}, not the JACK "
                        "test server's")


@pytest.fixture
def obs_config(tmp_path, monkeypatch):
    """Settings, the running-app record and the password file in a folder of the test's,
    and no system keyring (the developer's real one stays untouched)."""
    import keyring
    import keyring.backends.fail

    folder = tmp_path / "config"
    monkeypatch.setenv("LIPSYNC_STUDIO_CONFIG_DIR", str(folder))
    previous = keyring.get_keyring()
    keyring.set_keyring(keyring.backends.fail.Keyring())
    yield folder
    keyring.set_keyring(previous)


@pytest.fixture(scope="module")
def obs(window_manager, x_display, tmp_path_factory):
    """A real OBS Studio (tests/harness/obs.py) for the module."""
    from tests.harness.obs import Obs

    server = Obs(x_display, tmp_path_factory.mktemp("obs-home"))
    yield server
    server.stop()


@pytest.fixture
def obs_client(obs):
    """The test's own connection to `obs`."""
    from tests.harness.obs import connect

    c = connect(obs)
    yield c
    c.disconnect()


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """Paths a user might get wrong, each in its own way (for tests/harness/cli.py's
    assert_refused)."""
    import wave

    import numpy as np

    tmp = tmp_path_factory.mktemp("places").resolve()
    (tmp / "folder").mkdir()
    (tmp / "file.txt").write_text("not a folder")
    (tmp / "notes.wav").write_text("these are words, not sound")
    (tmp / "empty.wav").write_bytes(b"")
    (tmp / "empty.png").write_bytes(b"")
    rate = 16_000
    with wave.open(str(tmp / "nothing.wav"), "wb") as f:  # a header and no samples
        f.setnchannels(1), f.setsampwidth(2), f.setframerate(rate)
    with wave.open(str(tmp / "tone.wav"), "wb") as f:
        f.setnchannels(1), f.setsampwidth(2), f.setframerate(rate)
        tone = 0.3 * np.sin(2 * np.pi * 220 * np.arange(rate // 2) / rate)
        f.writeframes((tone * 32767).astype("<i2").tobytes())
    return tmp


@pytest.fixture(scope="module")
def landmarker():
    """MediaPipe's face landmarker, the real model, one per module."""
    from pipeline.face.landmarks import FaceLandmarker

    with FaceLandmarker() as lm:
        yield lm


@pytest.fixture(scope="module")
def astronaut():
    """skimage's astronaut (512×512 RGB): the photo the photo-avatar tests import."""
    from skimage import data

    return data.astronaut()


@pytest.fixture(scope="module")
def astronaut_png(tmp_path_factory, astronaut):
    """The astronaut as a PNG file, as a user's portrait comes."""
    from PIL import Image

    path = tmp_path_factory.mktemp("portrait") / "astronaut.png"
    Image.fromarray(astronaut).save(path)
    return path


@pytest.fixture(scope="module")
def astronaut_rig(astronaut_png, landmarker):
    """The astronaut imported as a photo rig, with the real landmarker."""
    from render.rigs.photo import import_portrait

    return import_portrait(astronaut_png, landmarker=landmarker)


@pytest.fixture(scope="module")
def astronaut_target(qt_app, astronaut):
    """A current offscreen GL target of the astronaut's size."""
    from render.gl.offscreen import OffscreenTarget

    h, w = astronaut.shape[:2]
    with OffscreenTarget(w, h) as t:
        yield t


@pytest.fixture(scope="module")
def astronaut_renderer(astronaut_target, astronaut_rig):
    """A PhotoRenderer drawing the astronaut rig at its own size into astronaut_target."""
    from render.gl.photo_renderer import PhotoRenderer

    r = PhotoRenderer()
    r.initialize()
    r.set_rig(astronaut_rig)
    r.resize(*astronaut_rig.canvas_size)
    yield r
    astronaut_target.make_current()
    r.release()
