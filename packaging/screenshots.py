"""Screenshots of the real app for README.md and docs/, written to docs/images/: the main
window speaking, three tabs of the settings panel and its list of latency modes, and the
avatar window OBS captures.
They are committed; run this again after changing what they show:

    python packaging/screenshots.py [--out docs/images]

It starts an X server (Xvfb, OpenGL by Mesa on the CPU) and a JACK server (dummy driver:
its device "system" is the sound card) of its own, as the tests do (tests/harness/
services.py; `make test` installs both), opens the app's main window with a settings
folder of its own, the bundled avatar and voice (tests/harness/app_driver.py), and grabs
each window from the X server as a screenshot tool does, the avatar's GL window included.
The main window and the avatar window are grabbed while the avatar's mouth is open on a
vowel of the line it speaks, its caption showing in the avatar window.

The PNGs are palette images (PALETTE_COLOURS colours, no dithering): the UI's flat
colours, its text and the cartoon avatar survive that. Last line of output: one JSON
object naming each file, its size in pixels and in bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.ui.window_place import DEFAULT_SIZE as MAIN_SIZE  # noqa: E402

OUT = ROOT / "docs" / "images"
# The X screen: the main window at its first-start size and the settings panel beside
# it, none covering another (a covered part of a window is not in its grab).
SCREEN = "1400x900x24"
# The avatar window at a size of its own (Settings → Outputs (OBS) → Avatar window size
# takes WIDTHxHEIGHT): small enough for a page, 16:9 as a stream's canvas.
AVATAR_WINDOW_SIZE = "640x360"
# The settings panel's tabs shown (its own names, app/ui/settings_panel.py), the panel
# sized for each: as tall as the tab's rows need here, with little room to spare.
PANEL_WIDTH = 560
PANEL_TABS = {"settings-voice.png": ("Voice", (PANEL_WIDTH, 770)),
              "settings-microphone.png": ("Microphone", (PANEL_WIDTH, 300)),
              "settings-outputs.png": ("Outputs (OBS)", (PANEL_WIDTH, 680))}
# The Voice tab's latency-mode list, opened (it pops up over the tab, its current choice
# over the box): its three choices (22 px each here) with a margin, across the panel.
MODES_SHOT = "latency-modes.png"
MODES_SIZE = (PANEL_WIDTH, 80)
MODES_ABOVE = 4
# Every file written, with its size in pixels.
SHOTS = {"main-window.png": MAIN_SIZE,
         **{name: size for name, (_, size) in PANEL_TABS.items()},
         MODES_SHOT: MODES_SIZE,
         "avatar-window.png": tuple(int(side) for side in AVATAR_WINDOW_SIZE.split("x"))}
# Enough for the UI's greys and text and the avatar's flat fills and outlines. Measured
# on one run's six shots: 107 KB in all, against 375 KB in full colour and 122 KB with
# 128 colours, which looked the same.
PALETTE_COLOURS = 64
# What the avatar says in each shot; a wide-open vowel ("aa") is waited for in each.
LINES = ("Hello chat, welcome back to the stream!", "Thanks for the follow, Sam!")
OPEN_VISEME = "aa"
# Its openness is 1.0 (pipeline/core/visemes.py's OPENNESS); a frame blending into or out
# of it shows less: from 0.7 on the jaw is most of the way down.
OPEN_ENOUGH = 0.7
# The mic on: a streamer's set-up, and the status line's longest form. 30 fps: half the
# drawing of the default 60 for Mesa's llvmpipe, on cores the voice needs too.
SETTINGS = dict(audio_output_device="system", mic_device="system", software_gl_fps=30,
                target_fps=30)


def _grab(window=None, area: tuple[int, int, int, int] | None = None):
    """What the X server shows of a top-level `window`, or of the screen's `area` (x, y,
    width, height: a list popped up over a window is a window of its own), as a PIL
    image (RGB)."""
    from PIL import Image
    from PySide6.QtGui import QGuiApplication, QImage

    screen = QGuiApplication.primaryScreen()
    pixmap = (screen.grabWindow(0, *area) if area is not None
              else screen.grabWindow(window.winId()))
    image = pixmap.toImage()
    image = image.convertToFormat(QImage.Format.Format_RGB888)
    data = bytes(image.constBits())[: image.bytesPerLine() * image.height()]
    return Image.frombytes("RGB", (image.width(), image.height()), data, "raw", "RGB",
                          image.bytesPerLine())


def _save(picture, path: Path) -> int:
    from PIL import Image

    palette = picture.quantize(PALETTE_COLOURS, method=Image.Quantize.MEDIANCUT,
                               dither=Image.Dither.NONE)
    palette.save(path, optimize=True)
    return path.stat().st_size


def _speak_until_open_mouth(window, surface, text: str) -> None:
    """Say `text` and return once `surface` (an AvatarSurface) has drawn and swapped a
    wide-open "aa" of it as its latest frame, so a grab right after shows it."""
    from pipeline.core.visemes import VISEME_INDEX
    from tests.harness.app_driver import pump_until, say

    vowel = VISEME_INDEX[OPEN_VISEME]
    drawn = []  # the pose of the latest frame drawn (and swapped, once the loop looks)

    def note(frame) -> None:
        drawn[:] = [frame.pose] if frame is not None else []

    # A hook of the surface's own, which the app leaves unset; the grab is taken before the
    # event loop runs again, so before the next frame is drawn.
    surface.frame_drawn = note
    try:
        say(window, text, timeout=30)
        pump_until(lambda: bool(drawn) and drawn[0].dominant == vowel
                   and drawn[0].openness >= OPEN_ENOUGH, 30,
                   f"an open {OPEN_VISEME!r} mouth on screen")
    finally:
        surface.frame_drawn = None


def take(out: Path) -> dict[str, dict]:
    """Start the servers and the app, write every shot into `out`; what was written."""
    from tests.harness.services import JackServer, Xvfb

    out.mkdir(parents=True, exist_ok=True)
    xvfb = Xvfb(SCREEN)
    os.environ["DISPLAY"] = xvfb.display
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    jack = JackServer()
    try:
        with tempfile.TemporaryDirectory(prefix="lipsync-screenshots-") as config:
            os.environ["LIPSYNC_STUDIO_CONFIG_DIR"] = config
            return _in_app(Path(config), out)
    finally:
        from pipeline.audio.devices import AudioUnavailable, portaudio_released

        try:
            with portaudio_released():
                jack.stop()
        except AudioUnavailable:
            jack.stop()
        xvfb.stop()


def _in_app(config: Path, out: Path) -> dict[str, dict]:
    import shiboken6
    from PySide6.QtWidgets import QApplication

    from app.settings import Settings
    from tests.harness.app_driver import open_window, pump, pump_until

    app = QApplication(["lipsync-studio"])
    app.setApplicationName("Lipsync Studio")
    written: dict[str, dict] = {}

    def shot(name: str, window=None, area=None) -> None:
        picture = _grab(window, area)
        written[name] = {"size": list(picture.size), "bytes": _save(picture, out / name)}

    window = open_window(config, Settings(**SETTINGS), size=MAIN_SIZE)
    try:
        window.move(0, 0)
        pump_until(lambda: window.engine.mic_stage is not None, 10, "the microphone opening")
        _speak_until_open_mouth(window, window.view.surface, LINES[0])
        window.refresh_status()  # this speech's first audio in the status line, painted now
        window.status.repaint()
        shot("main-window.png", window)

        panel = window.open_settings()
        panel.move(MAIN_SIZE[0], 0)
        titles = [panel.tabs.tabText(i) for i in range(panel.tabs.count())]
        for name, (title, size) in PANEL_TABS.items():
            panel.tabs.setCurrentIndex(titles.index(title))
            panel.resize(*size)
            pump(0.3)
            shot(name, panel)
            if title == "Voice":
                panel.mode.showPopup()
                pump(0.3)
                top = panel.mode.view().window().geometry().y() - MODES_ABOVE
                shot(MODES_SHOT, area=(panel.geometry().x(), top, *MODES_SIZE))
                panel.mode.hidePopup()
        panel.close()

        window.apply_settings(replace(window.settings, output_window=True,
                                      output_size=AVATAR_WINDOW_SIZE,
                                      output_background="chroma"))
        avatar = window.outputs.avatar_window
        avatar.setPosition(MAIN_SIZE[0], 0)
        pump_until(lambda: avatar.draws > 2, 10, "the avatar window drawing")
        _speak_until_open_mouth(window, avatar, LINES[1])
        shot("avatar-window.png", avatar)
        window.stop()
    finally:
        window.close()
        pump(0.2)
        app.closeAllWindows()
        app.processEvents()
        # Qt's X connection goes before the X server does, or Qt aborts at exit.
        shiboken6.delete(app)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"the folder (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args()
    written = take(args.out)
    print(json.dumps({"out": str(args.out), "shots": written}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
