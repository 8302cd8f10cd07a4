"""`lipsync-studio --headless`: the studio (app/studio.py: voice, microphone, outputs, OBS
link, API) running without the main window. Lines typed on standard input are spoken; a
line starting with "/" is a command (`/approve NAME`, `/deny NAME` answer an API client's
token request; `/stop`, `/skip`; `/help`). Messages are printed as they are told, and
each speech's heard first audio when it starts. Ctrl-C (or
SIGTERM) stops it cleanly: outputs closed, devices released, exit status 0.

Without a display server it draws through EGL (render/gl/egl_target.py), so it runs on a
machine with no X or Wayland session; with one, through Qt's offscreen GL.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

log = logging.getLogger(__name__)

HELP = ("Type a line and press Enter to speak it. Commands: /stop (stop speaking and "
        "empty the queue), /skip (the next line in the queue), "
        "/approve NAME or /deny NAME (an API client asking for a token), /help.")


def prepare_platform() -> bool:
    """Choose GL and Qt platforms before anything imports them: EGL and Qt's offscreen
    platform where no display is set. True when there is a display to draw through."""
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return True
    from render.gl.gl_platform import use_egl

    if not use_egl():
        raise RuntimeError("OpenGL was imported before the headless platform was chosen")
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    return False


def run_headless(*, output_window: bool | None = None, browser_port: int | None = None,
                 api_port: int | None = None) -> int:
    has_display = prepare_platform()
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QGuiApplication

    from app.heap import freeze_long_lived
    from app.messages import Severity
    from app.outputs import Wants
    from app.settings import SettingsStore
    from app.studio import Studio

    if output_window and not has_display:
        print("lipsync-studio: --output-window needs a display; running without it",
              file=sys.stderr)
        output_window = False
    app = QGuiApplication.instance() or QGuiApplication(["lipsync-studio"])
    stopping = threading.Event()

    def stop(*_):
        stopping.set()
        app.quit()

    # Before anything slow starts: Ctrl-C while the app starts stops it cleanly too.
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    store = SettingsStore()
    studio = Studio(store, store.load(), wants=Wants(output_window, browser_port),
                    api_port=api_port, measure_modes=False)

    def show(message) -> None:
        if message is None:  # a condition ended, or messages expired: nothing new to say
            return
        stream = sys.stdout if message.severity == Severity.INFO else sys.stderr
        print(f"lipsync-studio: {message.text}", file=stream, flush=True)

    # Messages told before start (the settings file's problems) are printed first.
    for message in studio.messages.history():
        show(message)
    studio.on_message = show
    studio.start()
    if not studio.outputs.opened:
        studio.tell("No output is on: turn on the browser source (--browser-source-port PORT), "
                    "the virtual camera, VMC or VTube Studio in the settings; the voice and "
                    "microphone run anyway.")

    # Qt's loop holds the interpreter in C: a timer lets Python run its signal handlers.
    wake = QTimer()
    wake.timeout.connect(lambda: None)
    wake.start(100)

    def read_stdin() -> None:
        for line in sys.stdin:
            if stopping.is_set():
                return
            studio.call_soon(lambda line=line.strip(): _typed(studio, line))

    def voice_ready() -> None:
        # Where the voice runs and the mouth frames are made is said by the studio itself.
        studio.tell("Voice ready: type a line and press Enter to speak it; Ctrl-C stops.",
                    Severity.INFO)
        threading.Thread(target=read_stdin, name="headless-stdin", daemon=True).start()

    studio.voice_ready.connect(voice_ready)
    studio.voice_ready.connect(freeze_long_lived)
    studio.speech_started.connect(lambda first: studio.tell(first.text(), Severity.INFO))
    studio.tell("Running headless; Ctrl-C stops.", Severity.INFO)
    if not stopping.is_set():  # a Ctrl-C during the start quit no loop yet
        app.exec()
    studio.close()
    show_stopped = studio.messages.post("Stopped.", Severity.INFO)
    show(show_stopped)
    return 0


def _typed(studio, line: str) -> None:
    """A line from standard input, on the studio's thread."""
    from app.messages import Severity
    from pipeline.text.input import TextInputError

    if not line:
        studio.tell("Nothing to speak: the line was empty.", Severity.INFO)
        return
    if not line.startswith("/"):
        try:
            if studio.say(line) is None:
                studio.tell("The voice is still loading; try again in a moment.", Severity.INFO)
        except TextInputError as exc:
            studio.tell(str(exc), Severity.INFO)
        return
    command, _, argument = line[1:].partition(" ")
    argument = argument.strip()
    if command == "stop":
        studio.stop()
    elif command in ("approve", "deny") and argument:
        if not studio.decide_token(argument, command == "approve"):
            studio.tell(f"No API client named {argument!r} is waiting for a token.")
    elif command == "skip":
        studio.skip()
    elif command == "help":
        studio.tell(HELP, Severity.INFO)
    else:
        studio.tell(f"Unknown command {line!r}. {HELP}")
