"""ObsLink: what Lipsync Studio sets up in OBS Studio (the avatar's capture in a scene, the
chroma key and its filters, the mic's sync offset, caption text), each operation a set of
obs-websocket requests run through app/obs/connection.py's ObsConnection.

Every operation (setup, set_mic_sync_offset, set_caption_text) is idempotent: running it
twice leaves OBS as running it once does, so when OBS drops the connection mid-way the
connection runs the whole operation again once OBS is back. Every failure reaches the
caller as ObsError (connection.py), one line saying what is wrong and what to do.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from app.obs.connection import ALREADY_EXISTS, NOT_FOUND, ObsConnection, ObsError, ObsRequestError
from app.obs.target import AVATAR_WINDOW_TITLE, SetupTarget
from app.obs.window_geometry import GeometryError, window_geometry
from render.outputs.background import CHROMA, TRANSPARENT, parse_colour

SOURCE_NAME = AVATAR_WINDOW_TITLE  # the source is named as the window it shows
PROBE_NAME = "Lipsync Studio — window probe"
CHROMA_FILTER_NAME = "Lipsync Studio chroma key"
# A filter after the chroma key that changes nothing (Color Correction at its defaults):
# OBS draws a source's last filter straight at the scene item's size, so a key that is
# last samples the window between pixels wherever the item is scaled, and keys blends of
# avatar and key colour, leaving green-tinted edges (20 pixels of the bundled avatar at
# scale 0.5). Followed by this one, the key runs at the window's own size and OBS scales
# what it keyed.
KEY_AT_SOURCE_SIZE_NAME = "Lipsync Studio: key before scaling"
KEY_AT_SOURCE_SIZE_KIND = "color_filter_v2"

# Window capture by OBS's platform (GetVersion's "platform": "windows", "macos", or on
# Linux the distribution's name): the input kind, its window-list property and the
# settings that go with it. Only the Linux one is exercised by the tests (Debian's OBS).
WINDOW_CAPTURE = {
    "windows": ("window_capture", "window", {"cursor": False, "priority": 1}),  # 1: match the title
    "macos": ("screen_capture", "window", {"type": 1, "show_cursor": False}),  # 1: one window
    "linux": ("xcomposite_input", "capture_window", {"show_cursor": False}),
}
# The chroma key, tighter than OBS's defaults: the avatar's background is exactly the key
# colour (drawn, not filmed) and every other pixel exactly an avatar colour
# (shaders/chroma.frag). OBS's defaults, made for a filmed green screen (similarity 400,
# smoothness 80, spill 100: 0.4, 0.08 and 0.1 in its CbCr distance), keyed out the bundled
# avatar's teal jumper (its nearest colour to green, at 0.391) with the background: 7458
# of its pixels at 320x240, and desaturated what was left near it. Spill 1: colours stay
# as they are. The filter averages its distance over a pixel's 3x3 neighbours: the
# compositor fills the key pixels that averaging would keep (tests/test_obs_setup.py, the
# real avatar window: no fringe pixel, the whole background keyed out at 640x360).
CHROMA_TUNING = {"similarity": 360, "smoothness": 10, "spill": 1}
# Microphone inputs, when OBS has no global Mic/Aux device (GetSpecialInputs "mic1").
MIC_KINDS = ("pulse_input_capture", "alsa_input_capture", "jack_output_capture",
             "wasapi_input_capture", "coreaudio_input_capture")
CAPTION_KINDS = {"windows": ("text_gdiplus_v2", {"font": {"face": "Arial", "size": 48}})}
CAPTION_DEFAULT = ("text_ft2_source_v2", {"font": {"face": "Sans Serif", "size": 48, "style": "", "flags": 0}})

# OBS applies a video source's new settings at its next video tick (1/30 s at its default
# 30 fps), where a working window capture gets the window's picture; 1 s is 30 ticks, room
# for a busy machine. (The probe is hidden, and OBS retries hidden captures no more.)
WINDOW_PICTURE_WAIT_S = 1.0


class ObsLink:
    """Lipsync Studio's set-up in the OBS at ``host``:``port``, through a connection
    opened at the first operation (ObsConnection: ``timeout`` bounds each connection
    attempt and request, ``reconnect_within_s`` how long an operation waits for OBS to
    come back after it dropped the connection)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 4455, password: str | None = None, *,
                 timeout: float = 5.0, reconnect_within_s: float = 20.0) -> None:
        self._connection = ObsConnection(host, port, password, timeout=timeout,
                                         reconnect_within_s=reconnect_within_s)

    @property
    def connection(self) -> ObsConnection:
        """What the operations run through (where it goes, who hears that it dropped)."""
        return self._connection

    def connect(self) -> str:
        """Connect now (if not connected); returns the line saying to what."""
        return self._connection.connect()

    def close(self) -> None:
        self._connection.close()

    # -- what Lipsync Studio sets up --

    def setup(self, target: SetupTarget, report: Callable[[str], None] = lambda line: None) -> list[str]:
        """Configure OBS for ``target``; returns what was done, a line each, also given to
        ``report`` as it happens. Raises ObsError."""
        lines: list[str] = []

        def say(line: str) -> None:
            lines.append(line)
            report(line)

        self._connection.run(lambda: self._setup(target, say), say)
        return lines

    def set_mic_sync_offset(self, offset_ms: float, latency_mode: str = "",
                            report: Callable[[str], None] = lambda line: None) -> list[str]:
        """Set the microphone input's audio sync offset to ``offset_ms`` (call it whenever
        the measured mic → mouth delay changes, e.g. with the latency mode). Returns the
        line saying what was done, or that OBS has no microphone input."""
        lines: list[str] = []

        def say(line: str) -> None:
            lines.append(line)
            report(line)

        self._connection.run(lambda: self._mic_offset(offset_ms, latency_mode, say), say)
        return lines

    def set_caption_text(self, source_name: str, text: str, scene: str | None = None) -> None:
        """Show ``text`` in the OBS text source ``source_name``, creating it (in ``scene``,
        default the current program scene) when missing."""
        self._connection.run(lambda: self._caption(source_name, text, scene), lambda line: None)

    def _platform(self) -> str:
        platform = self._connection.version.get("platform", "")
        return platform if platform in ("windows", "macos") else "linux"

    def _setup(self, target: SetupTarget, say: Callable[[str], None]) -> None:
        self._connection.version = self._connection.call("GetVersion")  # also finds out whether the connection still stands
        say(self._connection.greeting())
        kinds = set(self._connection.call("GetInputKindList", {"unversioned": True})["inputKinds"])
        scene = self._scene(target.scene)
        say(f"scene: {scene!r}")
        if target.browser_source_url and "browser_source" in kinds:
            width, height = target.size
            self._ensure_input(scene, SOURCE_NAME, "browser_source",
                               {"url": target.browser_source_url, "width": width, "height": height}, say)
            say(f"the browser source shows {target.browser_source_url}")
            have_source = True
        else:
            if target.browser_source_url:
                say("this OBS has no browser source (Debian's OBS is built without it): capturing the "
                    "avatar window instead")
            have_source = self._window_capture(scene, target, kinds, say)
        if have_source:
            self._chroma(target, say)
        self._mic_offset(target.mic_sync_offset_ms, target.latency_mode, say)

    def _scene(self, wanted: str | None) -> str:
        if wanted is None:
            answer = self._connection.call("GetCurrentProgramScene")
            return answer.get("currentProgramSceneName") or answer["sceneName"]
        names = [scene["sceneName"] for scene in self._connection.call("GetSceneList")["scenes"]]
        if wanted not in names:
            raise ObsError(f"OBS has no scene named {wanted!r} (its scenes: {', '.join(map(repr, names))})")
        return wanted

    def _input_kind(self, name: str) -> str | None:
        try:
            return self._connection.call("GetInputSettings", {"inputName": name})["inputKind"]
        except ObsRequestError as exc:
            if exc.code == NOT_FOUND:
                return None
            raise

    def _create_input(self, scene: str, name: str, kind: str, settings: dict, enabled: bool = True) -> int:
        """CreateInput; a name still held by an input just removed is retried for up to
        1 s (OBS frees it once the last reference to the removed input goes)."""
        deadline = time.monotonic() + 1.0
        while True:
            try:
                return self._connection.call("CreateInput", {"sceneName": scene, "inputName": name, "inputKind": kind,
                                                  "inputSettings": settings,
                                                  "sceneItemEnabled": enabled})["sceneItemId"]
            except ObsRequestError as exc:
                if exc.code != ALREADY_EXISTS or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _ensure_input(self, scene: str, name: str, kind: str, settings: dict,
                      say: Callable[[str], None]) -> None:
        """Input ``name`` of ``kind`` with ``settings`` (others kept), in ``scene`` once."""
        current = self._input_kind(name)
        if current is not None and current != kind:
            self._connection.call("RemoveInput", {"inputName": name})
            say(f"removed {name!r} ({current}) to put a {kind} in its place")
            current = None
        if current is None:
            self._create_input(scene, name, kind, settings)
            say(f"created {name!r} ({kind}) in scene {scene!r}")
            return
        self._connection.call("SetInputSettings", {"inputName": name, "inputSettings": settings, "overlay": True})
        try:
            self._connection.call("GetSceneItemId", {"sceneName": scene, "sourceName": name})
            say(f"updated {name!r} ({kind}), already in scene {scene!r}")
        except ObsRequestError as exc:
            if exc.code != NOT_FOUND:
                raise
            self._connection.call("CreateSceneItem", {"sceneName": scene, "sourceName": name})
            say(f"updated {name!r} ({kind}) and added it to scene {scene!r}")

    def _window_capture(self, scene: str, target: SetupTarget, kinds: set[str],
                        say: Callable[[str], None]) -> bool:
        """Point the avatar source at the window titled ``target.window_title``; True when
        there is an avatar source afterwards."""
        title = target.window_title
        kind, prop, extra = WINDOW_CAPTURE[self._platform()]
        if kind not in kinds:
            raise ObsError(f"this OBS has no {kind} (window capture) input: on Wayland add a 'Window "
                           f"Capture (PipeWire)' source by hand and pick {title!r}")
        # The window list is a property of an input: ask a hidden probe input, which also
        # shows whether OBS gets a picture of the window, without touching the user's
        # source (its place and size in the scene stay as they are).
        if self._input_kind(PROBE_NAME) is not None:
            self._connection.call("RemoveInput", {"inputName": PROBE_NAME})  # left by an interrupted run
        probe = self._create_input(scene, PROBE_NAME, kind, {}, enabled=False)
        try:
            items = self._connection.call("GetInputPropertiesListPropertyItems",
                               {"inputName": PROBE_NAME, "propertyName": prop})["propertyItems"]
            found = ([item for item in items if item["itemName"] == title]
                     or [item for item in items if title in item["itemName"]])
            if not found:
                have = self._input_kind(SOURCE_NAME) is not None
                say(f"the window {title!r} is not open now: open the avatar window (Settings → Avatar "
                    "window) and run this again" + (f"; {SOURCE_NAME!r} keeps what it showed" if have else ""))
                return have
            value = found[0]["itemValue"]
            settings = {prop: value, **extra}
            self._connection.call("SetInputSettings", {"inputName": PROBE_NAME, "inputSettings": settings})
            shows = self._wait_for_picture(scene, probe) if kind == "xcomposite_input" else True
        finally:
            self._remove_probe(scene)
        if shows:
            self._ensure_input(scene, SOURCE_NAME, kind, settings, say)
            say(f"captures the window {title!r} ({kind})")
            return True
        return self._screen_crop_fallback(scene, int(str(value).split("\r\n")[0]), target, kinds, say)

    def _remove_probe(self, scene: str) -> None:
        """Remove the probe and return once its scene item is gone too: OBS drops the items
        of a removed input at its next video tick (1/30 s); waited for up to 1 s, so that
        setup never returns with the probe still listed in the scene."""
        self._connection.call("RemoveInput", {"inputName": PROBE_NAME})
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                self._connection.call("GetSceneItemId", {"sceneName": scene, "sourceName": PROBE_NAME})
            except ObsRequestError as exc:
                if exc.code == NOT_FOUND:
                    return
                raise
            time.sleep(0.02)

    def _wait_for_picture(self, scene: str, item_id: int) -> bool:
        deadline = time.monotonic() + WINDOW_PICTURE_WAIT_S
        while True:
            size = self._connection.call("GetSceneItemTransform", {"sceneName": scene, "sceneItemId": item_id})
            if size["sceneItemTransform"]["sourceWidth"] > 0:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def _screen_crop_fallback(self, scene: str, window_id: int, target: SetupTarget, kinds: set[str],
                              say: Callable[[str], None]) -> bool:
        # Seen on Xvfb: OBS 29 draws through EGL only, and Mesa's software EGL on an X server
        # without DRI3 cannot make an EGLImage of a window pixmap (with --verbose OBS logs
        # "Cannot create EGLImage: One or more argument values are invalid"); docs/obs.md.
        why = ("window capture (XComposite) gets no picture of the window on this OBS: it cannot "
               "import the window's pixels (software OpenGL on an X server without DRI3, as on Xvfb "
               "or in a VM without a GPU driver)")
        if "xshm_input" not in kinds:
            raise ObsError(f"{why}, and this OBS has no screen capture (xshm_input) to fall back on")
        try:
            g = window_geometry(window_id, target.display)
        except GeometryError as exc:
            raise ObsError(f"{why}; the screen capture to fall back on must find the window's "
                           f"place, and {exc}") from None
        say(why)
        crop = {"screen": 0, "show_cursor": False, "cut_left": g.x, "cut_top": g.y,
                "cut_right": max(0, g.root_width - g.x - g.width),
                "cut_bot": max(0, g.root_height - g.y - g.height)}
        self._ensure_input(scene, SOURCE_NAME, "xshm_input", crop, say)
        say(f"instead, captures the screen cropped to the window {target.window_title!r} ({g.width}x"
            f"{g.height} at {g.x},{g.y}): it does not follow the window (run this again after "
            "moving it), and it shows whatever covers that place on screen")
        say("the avatar window is always on top: nothing covers it but what is on top too"
            if target.window_on_top else
            "keep the avatar window uncovered: tick Always on top under Avatar window in the "
            "settings (Outputs (OBS)); or capture the virtual camera in OBS instead (a Video "
            "Capture Device source), which nothing on screen covers")
        if target.background == TRANSPARENT:
            say("a screen capture has no transparency: the avatar's transparent background shows "
                "what is behind the window, or black; choose the chroma background in the settings "
                "to key it out in OBS")
        return True

    def _filter_exists(self, name: str) -> bool:
        try:
            self._connection.call("GetSourceFilter", {"sourceName": SOURCE_NAME, "filterName": name})
            return True
        except ObsRequestError as exc:
            if exc.code != NOT_FOUND:
                raise
            return False

    def _chroma(self, target: SetupTarget, say: Callable[[str], None]) -> None:
        exists = self._filter_exists(CHROMA_FILTER_NAME)
        if target.background != CHROMA:
            for name in (CHROMA_FILTER_NAME, KEY_AT_SOURCE_SIZE_NAME):
                if self._filter_exists(name):
                    self._connection.call("RemoveSourceFilter", {"sourceName": SOURCE_NAME, "filterName": name})
            if exists:
                say(f"removed the chroma key filter (the background is {target.background} now)")
            return
        red, green, blue, _ = (round(channel * 255) for channel in parse_colour(target.chroma_colour))
        # OBS colours are 0xAABBGGRR integers; the chroma key ignores the alpha byte.
        settings = {"key_color_type": "custom", "key_color": red | green << 8 | blue << 16, **CHROMA_TUNING}
        if exists:
            self._connection.call("SetSourceFilterSettings", {"sourceName": SOURCE_NAME, "filterName": CHROMA_FILTER_NAME,
                                                   "filterSettings": settings})
            say(f"updated the chroma key filter: key colour {target.chroma_colour}")
        else:
            self._connection.call("CreateSourceFilter", {"sourceName": SOURCE_NAME, "filterName": CHROMA_FILTER_NAME,
                                              "filterKind": "chroma_key_filter_v2", "filterSettings": settings})
            say(f"added a chroma key filter (chroma_key_filter_v2): key colour {target.chroma_colour}")
        if not self._filter_exists(KEY_AT_SOURCE_SIZE_NAME):
            self._connection.call("CreateSourceFilter", {"sourceName": SOURCE_NAME, "filterName": KEY_AT_SOURCE_SIZE_NAME,
                                              "filterKind": KEY_AT_SOURCE_SIZE_KIND, "filterSettings": {}})
            say(f"added {KEY_AT_SOURCE_SIZE_NAME!r} after it, a Color Correction that changes nothing: "
                "with it OBS keys the avatar at its own size and then scales it, leaving no green edge")
        names = [f["filterName"] for f in self._connection.call("GetSourceFilterList", {"sourceName": SOURCE_NAME})["filters"]]
        after_key = names.index(CHROMA_FILTER_NAME) + 1
        if names.index(KEY_AT_SOURCE_SIZE_NAME) != after_key:
            # Filters the user added in between would be drawn at the scaled size instead.
            self._connection.call("SetSourceFilterIndex", {"sourceName": SOURCE_NAME, "filterName": KEY_AT_SOURCE_SIZE_NAME,
                                                "filterIndex": after_key - (names.index(KEY_AT_SOURCE_SIZE_NAME)
                                                                            < after_key)})

    def _mic_inputs(self) -> list[str]:
        """OBS's global microphones (Settings → Audio), else its audio input captures."""
        special = self._connection.call("GetSpecialInputs")
        names = [special[key] for key in ("mic1", "mic2", "mic3", "mic4") if special.get(key)]
        if names:
            return names
        return [item["inputName"] for item in self._connection.call("GetInputList")["inputs"]
                if (item.get("unversionedInputKind") or item["inputKind"]) in MIC_KINDS]

    def _mic_offset(self, offset_ms: float | None, mode: str, say: Callable[[str], None]) -> None:
        if offset_ms is None:
            say("the microphone's sync offset is not changed: the app measures the mic → mouth delay "
                "while it runs, and Lipsync Studio is not running (start it and run this again; its "
                "status line shows the value)")
            return
        value = round(offset_ms)
        names = self._mic_inputs()
        if not names:
            say("no microphone input in OBS (no Mic/Aux device in its Settings → Audio, no audio input "
                f"capture source): add one and run this again to set its sync offset to {value} ms")
            return
        self._connection.call("SetInputAudioSyncOffset", {"inputName": names[0], "inputAudioSyncOffset": value})
        others = f"; left as they are: {', '.join(map(repr, names[1:]))}" if names[1:] else ""
        mode_text = f", {mode} mode" if mode else ""
        say(f"set the audio sync offset of the microphone {names[0]!r} to {value} ms (the measured "
            f"mic → mouth delay{mode_text}){others}")

    def _caption(self, source_name: str, text: str, scene: str | None) -> None:
        try:
            self._connection.call("SetInputSettings", {"inputName": source_name, "inputSettings": {"text": text}})
            return
        except ObsRequestError as exc:
            if exc.code != NOT_FOUND:
                raise
        kind, style = CAPTION_KINDS.get(self._platform(), CAPTION_DEFAULT)
        self._create_input(self._scene(scene), source_name, kind, {"text": text, **style})
