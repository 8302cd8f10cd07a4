"""`lipsync-studio --headless`: the voice, the microphone and the outputs that need no
window (browser source, virtual camera; the avatar window too if asked for) running
without the main window. Lines typed on standard input are spoken. Ctrl-C (or SIGTERM)
stops it cleanly: outputs closed, devices released, exit status 0.

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


def run_headless(*, output_window: bool | None = None, browser_port: int | None = None) -> int:
    has_display = prepare_platform()
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QGuiApplication

    from app.engine import Engine
    from app.obs.live import ObsLive
    from app.outputs import Outputs
    from app.settings import SettingsStore
    from app.ui.messages import Severity
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from pipeline.face.landmarks import PortraitError
    from render.rigs.loader import load_avatar_rig
    from render.rigs.manifest import RigError

    if output_window and not has_display:
        print("lipsync-studio: --output-window needs a display; running without it",
              file=sys.stderr)
        output_window = False
    app = QGuiApplication.instance() or QGuiApplication(["lipsync-studio"])
    store = SettingsStore()
    settings = store.load()

    def tell(message: str, severity: Severity = Severity.WARNING) -> None:
        print(f"lipsync-studio: {message}", file=sys.stderr if severity != Severity.INFO else sys.stdout,
              flush=True)

    for problem in store.problems:
        tell(f"In {store.path}: {problem}")
    engine = Engine(settings)
    problem = engine.start_audio()
    if problem:
        tell(problem, Severity.ERROR)
    problem = engine.start_mic()
    if problem:
        tell(problem)
    outputs = Outputs(engine, settings, tell,
                      frame_rate=min(settings.target_fps, settings.software_gl_fps))
    manifest = settings.avatar_manifest
    try:
        outputs.set_rig(load_avatar_rig(manifest or DEFAULT_AVATAR_MANIFEST))
    except (RigError, PortraitError) as exc:
        tell(f"Avatar not loaded: {exc} Showing the bundled avatar instead.")
        outputs.set_rig(load_avatar_rig(DEFAULT_AVATAR_MANIFEST))
    outputs.apply(settings, window=output_window, browser_port=browser_port)
    obs = ObsLive(engine, settings, tell)
    outputs.on_caption = obs.offer_caption
    if not outputs.feeds and outputs.avatar_window is None:
        tell("No output is on: turn on the browser source (--browser-source-port PORT) or the "
             "virtual camera in the settings; the voice and microphone run anyway.")

    stopping = threading.Event()

    def stop(*_):
        stopping.set()
        app.quit()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    # Qt's loop holds the interpreter in C: a timer lets Python run its signal handlers.
    wake = QTimer()
    wake.timeout.connect(lambda: None)
    wake.start(100)

    def load_voice() -> None:
        try:
            tts = Engine.load_voice(provider=settings.inference_provider)
            engine.attach_voice(tts)
            text, fell_back = Engine.inference_text(tts)
            tell(text, Severity.WARNING if fell_back else Severity.INFO)
        except Exception as exc:  # told, and the outputs keep running with the mic
            log.exception("voice failed to load")
            tell(f"The voice could not be loaded: {exc}", Severity.ERROR)
            return
        # Captions are fed on the speaker's thread; the track is made on the GUI thread.
        QTimer.singleShot(0, app, lambda: outputs.attach_voice(tts))
        tell("Voice ready: type a line and press Enter to speak it; Ctrl-C stops.", Severity.INFO)
        for line in sys.stdin:
            if stopping.is_set():
                return
            if line.strip():
                engine.say(line.strip())

    threading.Thread(target=load_voice, name="headless-voice", daemon=True).start()
    tell("Running headless; Ctrl-C stops.", Severity.INFO)
    app.exec()
    outputs.close()
    obs.close()
    engine.close()
    tell("Stopped.", Severity.INFO)
    return 0
