"""What `obs setup` configures: the running app's values when it runs, else the saved
settings. Plain values, no OBS."""

from __future__ import annotations

from dataclasses import dataclass

from app.settings import Settings
from render.outputs.frame_size import parse_size

# render.outputs.avatar_window.TITLE, spelt out here so that `obs setup` loads no Qt
# (tests/test_obs_setup.py checks they are the same).
AVATAR_WINDOW_TITLE = "Lipsync Studio — Avatar"
ENABLE_HINT = "OBS menu Tools → WebSocket Server Settings → Enable WebSocket server"


@dataclass(frozen=True)
class SetupTarget:
    """``mic_sync_offset_ms`` is the measured mic → mouth delay, None when nobody measured
    it (the app is not running): then the mic's offset in OBS is left as it is.
    ``browser_source_url`` is None when the browser-source page is off. ``scene`` None
    means OBS's current program scene; ``size`` is the browser source's, in pixels.
    ``display`` is the X display the avatar window is on (None: this process's)."""

    window_title: str = AVATAR_WINDOW_TITLE
    window_on_top: bool = Settings.output_on_top
    display: str | None = None
    background: str = Settings.output_background
    chroma_colour: str = Settings.chroma_colour
    browser_source_url: str | None = None
    mic_sync_offset_ms: float | None = None
    latency_mode: str = Settings.latency_mode
    scene: str | None = None
    size: tuple[int, int] = parse_size(Settings.output_size)


def browser_source_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/"


def target_from(settings: Settings, running: dict | None, scene: str | None = None) -> SetupTarget:
    """The target for the app running now (``running``: its record, running_app.py) or,
    when None, for the saved ``settings``. ``scene`` overrides settings.obs_scene."""
    common = dict(scene=scene or settings.obs_scene, size=parse_size(settings.output_size))
    if running is not None:
        return SetupTarget(
            window_title=running["avatar_window_title"] or AVATAR_WINDOW_TITLE,
            window_on_top=running["avatar_window_on_top"],
            display=running["display"],
            background=running["output_background"],
            chroma_colour=running["chroma_colour"],
            browser_source_url=running["browser_source_url"],
            mic_sync_offset_ms=running["mic_sync_offset_ms"],
            latency_mode=running["latency_mode"],
            **common)
    return SetupTarget(
        window_on_top=settings.output_on_top,
        background=settings.output_background,
        chroma_colour=settings.chroma_colour,
        browser_source_url=browser_source_url(settings.browser_source_port) if settings.browser_source else None,
        latency_mode=settings.latency_mode,
        **common)
