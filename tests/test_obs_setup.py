"""`lipsync-studio obs setup` and ObsLink against a real OBS Studio 29 (obs-websocket 5.1)
on the test display (tests/harness/obs.py): what it creates, read back through OBS's own
requests, what OBS shows of our window, and the one-line errors."""

from __future__ import annotations

import argparse
import base64
import gc
import io
import os
import re
import stat
import subprocess
import threading
import time

import keyring
import keyring.backend
import keyring.backends.fail
import numpy as np
import obsws_python
import pytest
from jaraco.classes.properties import classproperty
from PIL import Image

from app.obs import credentials
from app.obs.command import add_parser, run
from app.obs.connection import ObsError
from app.obs.link import (
    CHROMA_FILTER_NAME,
    CHROMA_TUNING,
    KEY_AT_SOURCE_SIZE_NAME,
    PROBE_NAME,
    SOURCE_NAME,
    ObsLink,
)
from app.obs.running_app import (
    read_running_app,
    remove_running_app,
    running_app_path,
    write_running_app,
)
from app.obs.target import AVATAR_WINDOW_TITLE, SetupTarget
from app.settings import Settings, SettingsStore
from tests.harness.obs import KEY, MIC, Obs, connect, free_port

# Settings, records and the password in a folder of each test's, no system keyring.
pytestmark = [pytest.mark.display, pytest.mark.usefixtures("obs_config")]

# The avatar stand-in: a window of two known colours, left and right half; the right one is
# the chroma key colour the tests set (KEY), which OBS's chroma key filter must make
# transparent.
LEFT, RIGHT = (200, 30, 120), (0x12, 0xAB, 0x34)
WINDOW_SIZE = (320, 240)
WINDOW_POS = (150, 90)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lipsync-studio")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["obs", "setup", *argv])


def record(**changes) -> dict:
    info = {"pid": os.getpid(), "avatar_window_title": AVATAR_WINDOW_TITLE,
            "avatar_window_on_top": True, "display": os.environ.get("DISPLAY"),
            "output_background": "chroma", "chroma_colour": KEY, "browser_source_url": None,
            "mic_sync_offset_ms": 47.4, "latency_mode": "balanced"}
    return {**info, **changes}


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.fixture
def avatar_window(qt_app, window_manager):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QColor, QPainter
    from PySide6.QtWidgets import QWidget

    from tests.harness.app_driver import pump, pump_until

    class TwoColours(QWidget):
        def paintEvent(self, event):  # noqa: N802 (Qt's name)
            painter = QPainter(self)
            half = self.width() // 2
            painter.fillRect(0, 0, half, self.height(), QColor(*LEFT))
            painter.fillRect(half, 0, self.width() - half, self.height(), QColor(*RIGHT))
            painter.end()

    window = TwoColours()
    window.setWindowTitle(AVATAR_WINDOW_TITLE)
    # On top: OBS's own main window must not cover it (the screen-capture fallback shows
    # whatever is on screen there).
    window.setWindowFlag(Qt.WindowType.WindowStaysOnTopHint)
    window.resize(*WINDOW_SIZE)
    window.move(*WINDOW_POS)
    window.show()
    pump_until(lambda: window.isVisible() and window.windowHandle().isExposed(), 10, "the avatar window shown")
    pump(0.3)  # its first paint reaches the X server
    yield window
    window.close()
    pump(0.05)


def screenshot(c: obsws_python.ReqClient, source: str) -> Image.Image:
    data = c.send("GetSourceScreenshot", {"sourceName": source, "imageFormat": "png"}, raw=True)["imageData"]
    return Image.open(io.BytesIO(base64.b64decode(data.partition(",")[2]))).convert("RGBA")


def scene_items(c: obsws_python.ReqClient, scene: str = "Scene") -> list[str]:
    return [item["sourceName"] for item in c.send("GetSceneItemList", {"sceneName": scene}, raw=True)["sceneItems"]]


def assert_scene_shows_window(c: obsws_python.ReqClient, right: tuple) -> None:
    """The scene's picture holds the window's picture exactly where OBS placed the avatar
    source: LEFT opaque in the left half, ``right`` (RGBA) in the right half, corners
    included, and nothing beside it. A capture whose settings were just applied shows its
    first picture at OBS's next video ticks (30 fps): polled for up to 3 s, 90 ticks."""
    item = next(i for i in c.send("GetSceneItemList", {"sceneName": "Scene"}, raw=True)["sceneItems"]
                if i["sourceName"] == SOURCE_NAME)
    x0, y0 = round(item["sceneItemTransform"]["positionX"]), round(item["sceneItemTransform"]["positionY"])
    w, h = WINDOW_SIZE
    expected = {(1, 1): (*LEFT, 255), (w // 4, h // 2): (*LEFT, 255), (w // 2 - 2, h - 2): (*LEFT, 255),
                (w // 2 + 1, 1): right, (3 * w // 4, h // 2): right, (w - 2, h - 2): right}
    deadline = time.monotonic() + 3.0
    while True:
        picture = screenshot(c, "Scene")
        # 3 levels: the screenshot is OBS's render, not a copy of the window's bytes.
        wrong = {xy: (picture.getpixel((x0 + xy[0], y0 + xy[1])), colour) for xy, colour in expected.items()
                 if not all(abs(a - b) <= 3 for a, b in zip(picture.getpixel((x0 + xy[0], y0 + xy[1])), colour))}
        if not wrong or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not wrong, f"(x, y): (seen, expected) {wrong}"
    assert picture.getpixel((x0 + w + 2, y0 + h // 2))[3] == 0, "nothing of the screen beside the window"


# -- no OBS needed --

def test_running_app_record_is_read_while_its_process_lives(obs_config):
    assert read_running_app() is None
    write_running_app(record())
    assert read_running_app() == record()
    write_running_app(record(pid=dead_pid()))
    assert read_running_app() is None, "a record left by a process that is gone is stale"
    running_app_path().write_text("{not json", encoding="utf-8")
    assert read_running_app() is None
    with pytest.raises(ValueError, match="mic_sync_offset_m"):
        write_running_app({k: v for k, v in record().items() if k != "mic_sync_offset_ms"} | {"mic_sync_offset_m": 1})
    write_running_app(record())
    remove_running_app()
    assert not running_app_path().exists()


def test_password_without_a_keyring_goes_to_a_file_only_the_user_can_read(obs_config):
    assert credentials.load_password() is None
    line = credentials.save_password("s3cret")
    path = obs_config / "obs-password"
    assert line == f"no system keyring; stored in {path} readable only by you"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)  # as if made by hand; saving again makes it private
    credentials.save_password("s3cret2")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert credentials.load_password() == "s3cret2"


class _MemoryKeyring(keyring.backend.KeyringBackend):
    """A keyring backend that keeps passwords in memory: the role a desktop's Secret Service
    plays, which this test machine has none of (no D-Bus session). keyring's own backend
    discovery sees every subclass: a priority that raises makes it skip this one unless a
    test turned it on."""

    enabled = False

    @classproperty
    def priority(cls):
        if not cls.enabled:
            raise RuntimeError("a test backend, for the test that turns it on")
        return 1

    def __init__(self):
        super().__init__()
        self.store: dict = {}

    def get_password(self, service, username):
        return self.store.get((service, username))

    def set_password(self, service, username, password):
        self.store[(service, username)] = password

    def delete_password(self, service, username):
        self.store.pop((service, username), None)


def test_password_goes_to_a_usable_keyring_and_leaves_no_file(obs_config, monkeypatch):
    credentials.save_password("from-before")  # a file from a machine without a keyring then
    backend = _MemoryKeyring()
    keyring.set_keyring(backend)
    monkeypatch.setattr(_MemoryKeyring, "enabled", True)
    assert "system keyring" in credentials.save_password("s3cret")
    assert backend.store == {(credentials.SERVICE, credentials.ACCOUNT): "s3cret"}
    assert not (obs_config / "obs-password").exists()
    assert credentials.load_password() == "s3cret"


def test_nothing_listening_says_obs_is_not_running(capsys):
    # Before any OBS of this module starts; another developer's OBS on this machine makes
    # the other message the right one, so the test says which it expects.
    port = free_port()
    obs_elsewhere = subprocess.run(["pgrep", "-x", "obs"], capture_output=True).returncode == 0
    assert run(parse("--port", str(port))) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("lipsync-studio: ")
    assert f"nothing answers at 127.0.0.1:{port}" in err
    if obs_elsewhere:
        assert "OBS is running but" in err
    else:
        assert "OBS is not running" in err and "Tools → WebSocket Server Settings → Enable" in err


def test_a_server_that_does_not_greet_as_obs_websocket_5_is_too_old(capsys):
    # obs-websocket 4 (OBS 27 and older) sends nothing until the client's first request,
    # where version 5 greets with a Hello: a WebSocket server that stays silent is what an
    # old OBS looks like to this client.
    from websockets.sync.server import serve

    silent = serve(lambda connection: connection.recv(), "127.0.0.1", 0)
    threading.Thread(target=silent.serve_forever, daemon=True).start()
    port = silent.socket.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(ObsError, match="did not greet as obs-websocket 5.*older than 28") as caught:
        ObsLink("127.0.0.1", port, timeout=1.0).connect()
    assert time.monotonic() - started < 3, "bounded by the link's timeout"
    # The error's context (the client library's timeout) holds the half-made client and its
    # socket until it is collected; the server's shutdown waits for that socket to close
    # (10 s, its close timeout, when the error was kept to the end of the test).
    del caught
    gc.collect()
    silent.shutdown()


# -- a real OBS --

def test_websocket_disabled_says_how_to_enable_it(window_manager, x_display, tmp_path, capsys):
    off = Obs(x_display, tmp_path / "obs-off", websocket=False)
    try:
        assert run(parse("--port", str(off.port))) == 1
        err = capsys.readouterr().err.strip()
        assert err == (f"lipsync-studio: OBS is running but nothing answers at 127.0.0.1:{off.port}: its "
                       "WebSocket server is off or on another port; enable it in the OBS menu Tools → "
                       "WebSocket Server Settings → Enable WebSocket server (and check the port there)")
    finally:
        off.stop()


def test_wrong_or_missing_password_is_one_line(obs, capsys):
    assert run(parse("--port", str(obs.port), "--password", "wrong")) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"lipsync-studio: OBS at 127.0.0.1:{obs.port} refused the password: pass the right one "
                   "with --password; OBS shows it under Tools → WebSocket Server Settings → Show Connect Info")
    assert credentials.load_password() is None, "a refused password is not saved"
    assert run(parse("--port", str(obs.port))) == 1
    assert "asks for a password: pass --password PASSWORD once" in capsys.readouterr().err


def test_setup_captures_the_window_keys_the_chroma_and_sets_the_mic_offset(obs, obs_client, avatar_window, capsys):
    obs_client.send("CreateInput", {"sceneName": "Scene", "inputName": MIC, "inputKind": "pulse_input_capture",
                                    "inputSettings": {}})
    write_running_app(record())
    assert run(parse("--port", str(obs.port), "--password", obs.password)) == 0
    out = capsys.readouterr().out
    assert f"setting OBS up for the running Lipsync Studio (pid {os.getpid()})" in out
    assert "stored in" in out and credentials.load_password() == obs.password

    # The window capture was pointed at our window: OBS's log names it.
    assert re.search(rf"\[window-capture: '{PROBE_NAME}'\] update settings:\n[\d:.]+: \ttitle: "
                     rf"{AVATAR_WINDOW_TITLE}\n", obs.log())
    kind = obs_client.send("GetInputSettings", {"inputName": SOURCE_NAME}, raw=True)["inputKind"]
    if kind == "xshm_input":
        # Xvfb has no DRI3 and OBS 29 draws through EGL only: Mesa cannot make an EGLImage
        # of the window's pixmap, so XComposite gets no picture, and setup says so.
        assert "Cannot create EGLImage" in obs.log()
        assert "window capture (XComposite) gets no picture" in out
        assert f"captures the screen cropped to the window '{AVATAR_WINDOW_TITLE}' (320x240 at" in out
    else:
        assert kind == "xcomposite_input"
        assert f"captures the window '{AVATAR_WINDOW_TITLE}' (xcomposite_input)" in out

    chroma = obs_client.send("GetSourceFilter", {"sourceName": SOURCE_NAME, "filterName": CHROMA_FILTER_NAME}, raw=True)
    assert chroma["filterKind"] == "chroma_key_filter_v2"
    assert chroma["filterSettings"]["key_color_type"] == "custom"
    assert chroma["filterSettings"]["key_color"] == 0x34ab12  # #12ab34 as OBS's 0xBBGGRR
    assert {k: chroma["filterSettings"][k] for k in ("similarity", "smoothness", "spill")} == CHROMA_TUNING
    assert obs_client.send("GetInputAudioSyncOffset", {"inputName": MIC}, raw=True)["inputAudioSyncOffset"] == 47
    assert f"set the audio sync offset of the microphone '{MIC}' to 47 ms" in out
    assert f"added '{KEY_AT_SOURCE_SIZE_NAME}' after it" in out

    # Idempotent: a second run updates what the first made.
    inputs_before = obs_client.send("GetInputList", raw=True)["inputs"]
    assert run(parse("--port", str(obs.port))) == 0, "the saved password is used"
    again = capsys.readouterr().out
    assert f"updated '{SOURCE_NAME}' ({kind}), already in scene 'Scene'" in again
    assert "updated the chroma key filter" in again
    assert scene_items(obs_client).count(SOURCE_NAME) == 1 and PROBE_NAME not in scene_items(obs_client)
    assert obs_client.send("GetInputList", raw=True)["inputs"] == inputs_before
    filters = obs_client.send("GetSourceFilterList", {"sourceName": SOURCE_NAME}, raw=True)["filters"]
    assert [f["filterName"] for f in filters] == [CHROMA_FILTER_NAME, KEY_AT_SOURCE_SIZE_NAME]

    # OBS shows the avatar: our window's pixels, edge to edge, the key colour keyed out.
    assert_scene_shows_window(obs_client, right=(0, 0, 0, 0))


def test_from_a_terminal_without_a_display_the_apps_own_display_is_used(obs, obs_client, avatar_window,
                                                                       monkeypatch, capsys):
    # As over ssh: OBS and the app run on the desktop, `obs setup` in a shell with no
    # DISPLAY. The screen-capture fallback must look at the window where it is.
    write_running_app(record())  # the app's record names its display
    monkeypatch.delenv("DISPLAY")
    assert run(parse("--port", str(obs.port), "--password", obs.password)) == 0
    out = capsys.readouterr().out
    if obs_client.send("GetInputSettings", {"inputName": SOURCE_NAME}, raw=True)["inputKind"] == "xshm_input":
        assert f"captures the screen cropped to the window '{AVATAR_WINDOW_TITLE}' (320x240 at" in out
        assert "the avatar window is always on top" in out
    # A record without one (its app has no display either): what is needed, in a line.
    write_running_app(record(display=None, avatar_window_on_top=False))
    code = run(parse("--port", str(obs.port)))
    err = capsys.readouterr().err.strip()
    if code == 1:
        assert "\n" not in err and "xwininfo" not in err, err
        assert err.endswith("it needs the X display the avatar window is on, and this terminal has none "
                            "(DISPLAY is not set, as over ssh): run this from a terminal of the desktop "
                            "the app runs on, or press Add to OBS in the app's settings"), err
    else:  # a window capture that works needs no look at the screen
        assert obs_client.send("GetInputSettings", {"inputName": SOURCE_NAME}, raw=True)["inputKind"] != "xshm_input"


def test_a_covered_avatar_window_is_said_with_what_avoids_it(obs, obs_client, avatar_window, capsys):
    write_running_app(record(avatar_window_on_top=False))
    assert run(parse("--port", str(obs.port), "--password", obs.password)) == 0
    out = capsys.readouterr().out
    if obs_client.send("GetInputSettings", {"inputName": SOURCE_NAME}, raw=True)["inputKind"] == "xshm_input":
        assert "it shows whatever covers that place on screen" in out
        assert ("keep the avatar window uncovered: tick Always on top under Avatar window in the settings "
                "(Outputs (OBS)); or capture the virtual camera in OBS instead") in out


def test_without_the_app_setup_uses_the_saved_settings(obs, obs_client, avatar_window, obs_config, capsys):
    SettingsStore().save(Settings(output_background="transparent", obs_port=obs.port, browser_source=True))
    write_running_app(record(pid=dead_pid()))  # left by an app that crashed
    assert run(parse("--password", obs.password)) == 0
    out = capsys.readouterr().out
    assert out.startswith("Lipsync Studio is not running: setting OBS up from the saved settings\n")
    assert "this OBS has no browser source (Debian's OBS is built without it): capturing the avatar window instead" in out
    assert "removed the chroma key filter (the background is transparent now)" in out
    if "captures the screen cropped" in out:
        assert "a screen capture has no transparency" in out
    assert "the microphone's sync offset is not changed" in out
    assert obs_client.send("GetSourceFilterList", {"sourceName": SOURCE_NAME}, raw=True)["filters"] == []
    assert_scene_shows_window(obs_client, right=(*RIGHT, 255))


def test_a_missing_scene_is_named_with_the_ones_there_are(obs, capsys):
    assert run(parse("--port", str(obs.port), "--password", obs.password, "--scene", "Nope")) == 1
    assert capsys.readouterr().err.strip() == "lipsync-studio: OBS has no scene named 'Nope' (its scenes: 'Scene')"


def test_the_mic_offset_follows_the_measured_delay(obs, obs_client):
    # What the app calls when the mic → mouth delay moves (a latency mode switch, a stall).
    if MIC not in [i["inputName"] for i in obs_client.send("GetInputList", raw=True)["inputs"]]:
        obs_client.send("CreateInput", {"sceneName": "Scene", "inputName": MIC, "inputKind": "pulse_input_capture",
                                        "inputSettings": {}})
    link = ObsLink("127.0.0.1", obs.port, obs.password)
    try:
        assert link.set_mic_sync_offset(80.4, "premium") == [
            f"set the audio sync offset of the microphone '{MIC}' to 80 ms (the measured mic → mouth delay, "
            "premium mode)"]
        assert obs_client.send("GetInputAudioSyncOffset", {"inputName": MIC}, raw=True)["inputAudioSyncOffset"] == 80
    finally:
        link.close()


def test_the_command_line_says_what_it_takes(capsys):
    with pytest.raises(SystemExit):
        parse("--help")
    usage = " ".join(capsys.readouterr().out.split())
    # The issue's own spelling of the command.
    assert usage.startswith("usage: lipsync-studio obs setup [-h] [--host H] [--port P] "
                            "[--password PW] [--scene NAME]")
    assert run(parse("--port", "70000")) == 1
    assert capsys.readouterr().err == "lipsync-studio: --port 70000 is out of range: use 1 to 65535\n"


def test_captions_go_into_a_text_source_made_when_missing(obs, obs_client):
    link = ObsLink("127.0.0.1", obs.port, obs.password)
    try:
        link.set_caption_text("Test captions", "Hello there")
        link.set_caption_text("Test captions", "General Kenobi")
    finally:
        link.close()
    answer = obs_client.send("GetInputSettings", {"inputName": "Test captions"}, raw=True)
    assert answer["inputKind"] == "text_ft2_source_v2"
    assert answer["inputSettings"]["text"] == "General Kenobi"
    assert scene_items(obs_client).count("Test captions") == 1
    obs_client.send("RemoveInput", {"inputName": "Test captions"})  # it would cover the avatar's place


def test_the_link_reconnects_when_obs_restarts(obs, avatar_window):
    link = ObsLink("127.0.0.1", obs.port, obs.password)
    target = SetupTarget(background="chroma", mic_sync_offset_ms=30.0)
    link.setup(target)
    obs.kill()
    result: dict = {}

    def set_up_again():
        try:
            result["lines"] = link.setup(target)
        except ObsError as exc:
            result["lines"] = [f"ObsError: {exc}"]

    # The link finds the connection dead and retries while OBS starts again, here.
    worker = threading.Thread(target=set_up_again)
    worker.start()
    obs.start()
    worker.join(30)  # reconnect_within_s is 20 s
    link.close()
    lines = result["lines"]
    assert lines[0] == f"lost the connection to OBS at 127.0.0.1:{obs.port}; reconnecting (for up to 20 s)"
    assert lines[1].startswith("reconnected after ")
    c = connect(obs)
    try:
        assert SOURCE_NAME in scene_items(c), "set up again in the OBS that came back"
    finally:
        c.disconnect()


def test_the_link_gives_up_when_obs_stays_away(obs):
    link = ObsLink("127.0.0.1", obs.port, obs.password, reconnect_within_s=1.5)
    link.connect()
    obs.kill()
    started = time.monotonic()
    with pytest.raises(ObsError) as raised:
        link.set_mic_sync_offset(40)
    assert str(raised.value) == (f"OBS closed the connection at 127.0.0.1:{obs.port} (did it quit?) and did "
                                 "not come back within 1.5 s")
    # 1.5 s of backoff, plus one connection attempt (refused at once here).
    assert time.monotonic() - started < 1.5 + 1.0
    obs.start()


def _rgba(image) -> np.ndarray:
    """A QImage as H×W×4 straight RGBA ints."""
    from PySide6.QtGui import QImage

    image = image.convertToFormat(QImage.Format.Format_RGBA8888)
    return np.frombuffer(image.constBits(), np.uint8).reshape(
        image.height(), image.bytesPerLine() // 4, 4)[:, :image.width()].astype(int)


def _mixed_in(seen, avatar, colour) -> np.ndarray:
    """How much of ``colour`` a pixel of OBS's picture has beyond the avatar's own colour
    there: the projection of their difference on the line from the avatar's colour to
    ``colour`` (0: none, 1: all ``colour``)."""
    towards = np.asarray(colour) - avatar
    return ((seen - avatar) * towards).sum(-1) / np.maximum((towards * towards).sum(-1), 1)


# The size the issue measured the fringe at (861 magenta and 174 green pixels of 61,546).
FRINGE_SIZE = (640, 360)


def test_obs_keys_the_real_avatar_window_without_a_fringe(obs, obs_client, qt_app, window_manager, capsys):
    """The app's own avatar window (render/outputs/avatar_window.py) with the bundled avatar
    on the chroma background, set up in OBS by `obs setup` (its chroma key filter), in
    OBS's picture of the scene at 1:1 and scaled by OBS: the background is keyed out and
    no pixel OBS shows carries the key colour or its complement."""
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.outputs.avatar_window import TITLE, AvatarWindow
    from render.outputs.background import CHROMA, TRANSPARENT, Background, parse_colour
    from render.rigs.loader import load_avatar_rig
    from tests.harness.app_driver import pump, pump_until

    assert TITLE == AVATAR_WINDOW_TITLE
    green = (0, 255, 0)
    # 10 fps: a still avatar (no blinks, no breathing) needs no more, and llvmpipe's GL
    # at 60 fps would take half a core of the two others share.
    window = AvatarWindow(FRINGE_SIZE, fps=10, background=Background(TRANSPARENT), on_top=True)
    window.set_idle_motion(blinking=False, breathing=False)
    window.set_rig(load_avatar_rig(DEFAULT_AVATAR_MANIFEST))
    window.show()
    try:
        pump_until(lambda: window.gl_ready and window.draws > 2, 10, "the avatar window drawing")
        alone = _rgba(window.grab_frame())  # the avatar over nothing: what keying should give
        window.set_background(Background(CHROMA, parse_colour("#00ff00")))
        drawn = window.draws
        pump_until(lambda: window.draws > drawn + 2, 10, "the chroma background drawn")
        write_running_app(record(chroma_colour="#00ff00"))
        assert run(parse("--port", str(obs.port), "--password", obs.password)) == 0
        capsys.readouterr()
        item = next(i for i in obs_client.send("GetSceneItemList", {"sceneName": "Scene"}, raw=True)["sceneItems"]
                    if i["sourceName"] == SOURCE_NAME)
        x0 = round(item["sceneItemTransform"]["positionX"])
        y0 = round(item["sceneItemTransform"]["positionY"])
        w, h = FRINGE_SIZE
        nothing, opaque = alone[..., 3] == 0, alone[..., 3] == 255
        assert nothing.sum() > 0.2 * w * h and opaque.sum() > 0.2 * w * h
        deadline = time.monotonic() + 3.0  # the capture's first pictures: 90 OBS ticks
        while True:
            seen = np.asarray(screenshot(obs_client, "Scene"))[y0:y0 + h, x0:x0 + w].astype(int)
            keyed_out = (seen[nothing][:, 3] == 0).mean()
            # Both: before the capture's first picture OBS shows nothing there, which is
            # "keyed out" too (a full run once read that picture: 0 avatar pixels shown).
            avatar_shown = (seen[opaque][:, 3] > 0).all()
            if (keyed_out > 0.99 and avatar_shown) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        # All of it: the key pixels the filter's 3×3 averaging would keep are filled by
        # the compositor (measured 2 of 168,232 kept, pure green, before it filled them).
        assert keyed_out == 1.0, f"only {keyed_out:.2%} of the background is keyed out"
        shown = seen[..., 3] > 0
        assert (shown & opaque).sum() == opaque.sum(), "OBS keyed out opaque avatar pixels"
        # Where the avatar covers anything, how much key (green) or complement (magenta)
        # is mixed into what OBS shows, beyond the avatar's own colour there. A quarter
        # is a tint anyone sees on stream; the outline was half magenta.
        # Weighted by the pixel's opacity in OBS: what reaches the viewer.
        covered, opacity = shown & ~nothing, seen[..., 3] / 255
        key_tint = covered & (_mixed_in(seen[..., :3], alone[..., :3], green) * opacity > 0.25)
        magenta_tint = covered & (_mixed_in(seen[..., :3], alone[..., :3], (255, 0, 255)) * opacity > 0.25)
        # And where nothing was drawn, whatever OBS still shows must not be green.
        specks = shown & nothing & (seen[..., 1] - np.maximum(seen[..., 0], seen[..., 2]) > 60)
        fringe = {"green-tinted": int(key_tint.sum()), "magenta-tinted": int(magenta_tint.sum()),
                  "green specks": int(specks.sum())}
        # None: every pixel the avatar covers is drawn in the avatar's own colour
        # (shaders/chroma.frag), so no mix of key or complement exists to be shown.
        assert fringe == {"green-tinted": 0, "magenta-tinted": 0, "green specks": 0}, fringe

        # OBS scaling the source (a streamer fits the avatar to the scene): the key runs at
        # the window's size (link.py KEY_AT_SOURCE_SIZE_NAME) and leaves its keyed pixels
        # premultiplied black, so scaled edges blend the avatar with nothing. No pixel may
        # come nearer the key than the avatar's own colours are (the bundled avatar's
        # nearest is 172.8 levels from #00ff00; its scaled picture's, 173.1 at 0.5 and
        # 172.8 at 1.5, measured), 8 levels left for the scaler's rounding.
        own = alone[opaque][:, :3]
        nearest_own = np.linalg.norm(own - green, axis=-1).min()
        for scale in (0.5, 1.5):
            obs_client.send("SetSceneItemTransform", {"sceneName": "Scene", "sceneItemId": item["sceneItemId"],
                                                      "sceneItemTransform": {"scaleX": scale, "scaleY": scale}})
            pump(0.2)  # a few OBS ticks
            scaled = np.asarray(screenshot(obs_client, "Scene")).astype(int)
            box = scaled[y0:y0 + round(h * scale), x0:x0 + round(w * scale)]
            visible = box[box[..., 3] >= 128][:, :3]
            near_key = (np.linalg.norm(visible - green, axis=-1) < nearest_own - 8).sum()
            obs_client.send("SetSceneItemTransform", {"sceneName": "Scene", "sceneItemId": item["sceneItemId"],
                                                      "sceneItemTransform": {"scaleX": 1.0, "scaleY": 1.0}})
            assert near_key == 0, f"at scale {scale}, {near_key} pixels nearer the key than the avatar is"
    finally:
        window.shutdown()
        window.close()
        window.deleteLater()
        qt_app.processEvents()


def test_the_pusher_sends_the_newest_values_without_blocking_the_caller(obs, obs_client):
    from app.obs.pusher import ObsPusher

    if MIC not in [i["inputName"] for i in obs_client.send("GetInputList", raw=True)["inputs"]]:
        obs_client.send("CreateInput", {"sceneName": "Scene", "inputName": MIC, "inputKind": "pulse_input_capture",
                                        "inputSettings": {}})
    errors: list[str] = []
    pusher = ObsPusher(ObsLink("127.0.0.1", obs.port, obs.password), errors.append)
    try:
        started = time.monotonic()
        for n in range(200):  # words faster than any speech: most are superseded, none waits
            pusher.offer_caption("Test captions", f"word {n}")
        pusher.offer_sync_offset(65.0, "balanced")
        offered = time.monotonic() - started

        def sent():
            try:
                text = obs_client.send("GetInputSettings", {"inputName": "Test captions"}, raw=True)["inputSettings"]["text"]
            except obsws_python.error.OBSSDKRequestError:
                return False  # not made yet
            offset = obs_client.send("GetInputAudioSyncOffset", {"inputName": MIC}, raw=True)["inputAudioSyncOffset"]
            return text == "word 199" and offset == 65

        deadline = time.monotonic() + 5  # a few requests on a loaded machine
        while not sent():
            assert time.monotonic() < deadline, "the newest caption and offset did not reach OBS"
            time.sleep(0.05)
        assert offered < 0.05, f"201 offers took {offered * 1e3:.1f} ms"
        assert errors == []
    finally:
        pusher.close()
        obs_client.send("RemoveInput", {"inputName": "Test captions"})  # it would cover the avatar's place


def test_the_pusher_tells_a_failure_once(capsys):
    from app.obs.pusher import ObsPusher

    port = free_port()
    errors: list[str] = []
    pusher = ObsPusher(ObsLink("127.0.0.1", port, timeout=1.0), errors.append)
    try:
        pusher.offer_sync_offset(50.0)
        deadline = time.monotonic() + 3
        while not errors:
            assert time.monotonic() < deadline, "no error told"
            time.sleep(0.02)
        pusher.offer_sync_offset(55.0)  # fails again: not told again
        time.sleep(0.3)
        assert len(errors) == 1 and f"nothing answers at 127.0.0.1:{port}" in errors[0]
        assert errors[0].startswith("OBS: ")
    finally:
        pusher.close()
