"""Session-wide real services. Tests that need a display or audio ask for these fixtures."""

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
