"""ObsLink: one connection to OBS Studio through obs-websocket 5 (obsws-python), and what
Lipsync Studio sets up through it.

Invariants:
- Every failure reaches the caller as ObsError, whose message is one line saying what is
  wrong and what to do; obsws-python's own logging (tracebacks) is silenced.
- Every operation (setup, set_mic_sync_offset, set_caption_text) is idempotent: running it
  twice leaves OBS as running it once does. So when OBS drops the connection mid-way (it
  quit or crashed), the link reconnects with a bounded backoff and runs the whole
  operation again, instead of guessing which request got through.
- One operation at a time (a lock): the settings panel calls from a worker thread while
  captions may be written from another.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import obsws_python
from obsws_python.error import OBSSDKError, OBSSDKRequestError
from websocket import WebSocketBadStatusException, WebSocketException, WebSocketTimeoutException

from app.obs.target import AVATAR_WINDOW_TITLE, ENABLE_HINT, SetupTarget
from app.obs.window_geometry import GeometryError, window_geometry
from render.outputs.background import CHROMA, TRANSPARENT, parse_colour

# obsws-python logs each failure with a traceback before raising it (we say each in a
# line), and every connection's parameters, the password in clear, at INFO.
logging.getLogger("obsws_python").setLevel(logging.CRITICAL + 1)

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
PASSWORD_HINT = "OBS shows it under Tools → WebSocket Server Settings → Show Connect Info"

# obs-websocket 5 request status codes (RequestStatus in its protocol).
NOT_FOUND = 600
ALREADY_EXISTS = 601

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
FIRST_RETRY_S, MAX_RETRY_S = 0.25, 4.0


class ObsError(Exception):
    """Something about OBS the user must fix, in one line. ``retryable``: the connection
    failed in a way that OBS coming back would cure (refused, reset, timed out)."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class ObsRequestError(ObsError):
    """OBS answered a request with an error status ``code``."""

    def __init__(self, request: str, code: int, comment: str) -> None:
        super().__init__(f"OBS could not do {request}: {comment or f'status {code}'}")
        self.request = request
        self.code = code


class PasswordError(ObsError):
    """OBS asks for a password and none was given (``missing``), or refused the one given.
    Where to give it is the front end's: ``advice(how)`` is the message with its way
    (the command line's option, the window's field); the plain message names none."""

    def __init__(self, where: str, missing: bool) -> None:
        self.where, self.missing = where, missing
        super().__init__(self.advice("enter it beside Add to OBS in Lipsync Studio's settings "
                                     "(Outputs (OBS)) and press Add to OBS"))

    def advice(self, how: str) -> str:
        problem = "asks for a password" if self.missing else "refused the password"
        return f"OBS at {self.where} {problem}: {how}; {PASSWORD_HINT}"


class _Lost(Exception):
    """The connection dropped during a request."""


def _obs_process_running() -> bool:
    """Whether an OBS Studio process runs on this machine (Linux: /proc; elsewhere unknown,
    taken as False)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return False
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "obs":
                    return True
            except OSError:
                continue
    return False


def _is_local(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1", socket.gethostname())


class ObsLink:
    """A connection to obs-websocket at ``host``:``port``, opened at the first operation.

    ``reconnect_within_s`` bounds how long an operation waits for OBS to come back after
    it dropped the connection; ``timeout`` bounds each connection attempt and request.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 4455, password: str | None = None, *,
                 timeout: float = 5.0, reconnect_within_s: float = 20.0) -> None:
        self.host, self.port, self.password = host, port, password
        self.timeout = timeout
        self.reconnect_within_s = reconnect_within_s
        self.version: dict = {}
        self._client: obsws_python.ReqClient | None = None
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    # -- connection --

    def connect(self) -> str:
        """Connect now (if not connected); returns the line saying to what."""
        with self._lock:
            if self._client is None:
                self._open()
            return self._greeting()

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _greeting(self) -> str:
        return (f"connected to OBS {self.version.get('obsVersion', '?')} (obs-websocket "
                f"{self.version.get('obsWebSocketVersion', '?')}) at {self.where}")

    def _drop(self) -> None:
        if self._client is not None:
            try:
                self._client.disconnect()
            except (OSError, WebSocketException):
                pass
            self._client = None

    def _open(self) -> None:
        """Connect and identify, or raise ObsError saying which step failed and why."""
        where = self.where
        try:
            socket.create_connection((self.host, self.port), self.timeout).close()
        except socket.gaierror:
            raise ObsError(f"cannot find the host {self.host!r} (check the OBS websocket address: "
                           "Settings → Outputs (OBS), or obs setup --host)") from None
        except ConnectionRefusedError:
            raise ObsError(self._nothing_listening(), retryable=True) from None
        except TimeoutError:
            raise ObsError(f"no answer from {where} within {self.timeout:g} s (a wrong host, or a "
                           "firewall in the way)", retryable=True) from None
        except OSError as exc:
            raise ObsError(f"cannot reach {where}: {exc.strerror or exc}", retryable=True) from None
        too_old = (f"{where} took the connection but did not greet as obs-websocket 5 does: an OBS "
                   "older than 28 (obs-websocket 4)? Update OBS to 28 or newer, which has "
                   "obs-websocket 5 built in")
        try:
            client = obsws_python.ReqClient(host=self.host, port=self.port, password=self.password or "",
                                            timeout=self.timeout)
        except ConnectionRefusedError:
            raise ObsError(self._nothing_listening(), retryable=True) from None
        except (WebSocketTimeoutException, TimeoutError, ValueError, KeyError, TypeError):
            # No Hello within the timeout (obs-websocket 4 waits for the client to speak
            # first), or a first message that is not a v5 Hello.
            raise ObsError(too_old) from None
        except WebSocketBadStatusException as exc:
            raise ObsError(f"{where} is not obs-websocket (it answered the WebSocket handshake with "
                           f"HTTP {exc.status_code}); check the port") from None
        except OBSSDKError as exc:
            # Identification refused after a Hello that asked for authentication: OBS
            # closes with 4009 (authentication failed), which obsws-python reports so.
            raise PasswordError(where, missing="no password provided" in str(exc)) from None
        except (WebSocketException, OSError) as exc:
            raise ObsError(f"the connection to OBS at {where} failed: {exc}", retryable=True) from None
        self._client = client
        try:
            self.version = self._call("GetVersion")
        except _Lost:
            self._client = None
            raise ObsError(f"OBS at {where} closed the connection right after it opened",
                           retryable=True) from None
        major = str(self.version.get("obsWebSocketVersion", "0")).split(".")[0]
        if not major.isdigit() or int(major) < 5:
            self._drop()
            raise ObsError(f"obs-websocket {self.version.get('obsWebSocketVersion')} at {where} is too old: "
                           "update OBS to 28 or newer (obs-websocket 5)")

    def _nothing_listening(self) -> str:
        if _is_local(self.host) and _obs_process_running():
            return (f"OBS is running but nothing answers at {self.where}: its WebSocket server is off or "
                    f"on another port; enable it in the {ENABLE_HINT} (and check the port there)")
        if _is_local(self.host):
            return (f"OBS is not running (nothing answers at {self.where}): start OBS Studio with its "
                    f"WebSocket server on ({ENABLE_HINT}), then try again")
        return (f"nothing answers at {self.where}: OBS is not running there, or its WebSocket server is "
                f"off ({ENABLE_HINT})")

    def _call(self, request: str, data: dict | None = None) -> dict:
        """One request; its response data ({} when none). ObsRequestError for an error status,
        _Lost when the connection dropped."""
        if self._client is None:
            self._open()
        try:
            return self._client.send(request, data, raw=True) or {}
        except OBSSDKRequestError as exc:
            comment = str(exc).partition("With message: ")[2]
            raise ObsRequestError(request, exc.code, comment) from None
        except (OBSSDKError, WebSocketException, OSError, ValueError) as exc:
            # A closed socket, a reset, a request timeout, or the empty frame
            # websocket-client returns for a close (json cannot parse it).
            self._drop()
            raise _Lost(str(exc)) from None

    def _run(self, operation: Callable[[], None], say: Callable[[str], None]) -> None:
        """Run ``operation``; when the connection drops, reconnect with backoff (first retry
        after FIRST_RETRY_S, doubling up to MAX_RETRY_S, for at most reconnect_within_s in
        all) and run it again from the start."""
        with self._lock:
            deadline = None
            while True:
                try:
                    operation()
                    return
                except _Lost:
                    if deadline is None:
                        deadline = time.monotonic() + self.reconnect_within_s
                        lost_at = time.monotonic()
                        say(f"lost the connection to OBS at {self.where}; reconnecting "
                            f"(for up to {self.reconnect_within_s:g} s)")
                    self._reconnect(deadline)
                    say(f"reconnected after {time.monotonic() - lost_at:.1f} s; starting over")

    def _reconnect(self, deadline: float) -> None:
        delay = FIRST_RETRY_S
        while True:
            try:
                self._open()
                return
            except ObsError as exc:
                left = deadline - time.monotonic()
                if not exc.retryable:
                    raise
                if left <= 0:
                    raise ObsError(f"OBS closed the connection at {self.where} (did it quit?) and did not "
                                   f"come back within {self.reconnect_within_s:g} s") from None
                time.sleep(min(delay, left))
                delay = min(delay * 2, MAX_RETRY_S)

    # -- what Lipsync Studio sets up --

    def setup(self, target: SetupTarget, report: Callable[[str], None] = lambda line: None) -> list[str]:
        """Configure OBS for ``target``; returns what was done, a line each, also given to
        ``report`` as it happens. Raises ObsError."""
        lines: list[str] = []

        def say(line: str) -> None:
            lines.append(line)
            report(line)

        self._run(lambda: self._setup(target, say), say)
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

        self._run(lambda: self._mic_offset(offset_ms, latency_mode, say), say)
        return lines

    def set_caption_text(self, source_name: str, text: str, scene: str | None = None) -> None:
        """Show ``text`` in the OBS text source ``source_name``, creating it (in ``scene``,
        default the current program scene) when missing."""
        self._run(lambda: self._caption(source_name, text, scene), lambda line: None)

    def _platform(self) -> str:
        platform = self.version.get("platform", "")
        return platform if platform in ("windows", "macos") else "linux"

    def _setup(self, target: SetupTarget, say: Callable[[str], None]) -> None:
        self.version = self._call("GetVersion")  # also finds out whether the connection still stands
        say(self._greeting())
        kinds = set(self._call("GetInputKindList", {"unversioned": True})["inputKinds"])
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
            answer = self._call("GetCurrentProgramScene")
            return answer.get("currentProgramSceneName") or answer["sceneName"]
        names = [scene["sceneName"] for scene in self._call("GetSceneList")["scenes"]]
        if wanted not in names:
            raise ObsError(f"OBS has no scene named {wanted!r} (its scenes: {', '.join(map(repr, names))})")
        return wanted

    def _input_kind(self, name: str) -> str | None:
        try:
            return self._call("GetInputSettings", {"inputName": name})["inputKind"]
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
                return self._call("CreateInput", {"sceneName": scene, "inputName": name, "inputKind": kind,
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
            self._call("RemoveInput", {"inputName": name})
            say(f"removed {name!r} ({current}) to put a {kind} in its place")
            current = None
        if current is None:
            self._create_input(scene, name, kind, settings)
            say(f"created {name!r} ({kind}) in scene {scene!r}")
            return
        self._call("SetInputSettings", {"inputName": name, "inputSettings": settings, "overlay": True})
        try:
            self._call("GetSceneItemId", {"sceneName": scene, "sourceName": name})
            say(f"updated {name!r} ({kind}), already in scene {scene!r}")
        except ObsRequestError as exc:
            if exc.code != NOT_FOUND:
                raise
            self._call("CreateSceneItem", {"sceneName": scene, "sourceName": name})
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
            self._call("RemoveInput", {"inputName": PROBE_NAME})  # left by an interrupted run
        probe = self._create_input(scene, PROBE_NAME, kind, {}, enabled=False)
        try:
            items = self._call("GetInputPropertiesListPropertyItems",
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
            self._call("SetInputSettings", {"inputName": PROBE_NAME, "inputSettings": settings})
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
        self._call("RemoveInput", {"inputName": PROBE_NAME})
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                self._call("GetSceneItemId", {"sceneName": scene, "sourceName": PROBE_NAME})
            except ObsRequestError as exc:
                if exc.code == NOT_FOUND:
                    return
                raise
            time.sleep(0.02)

    def _wait_for_picture(self, scene: str, item_id: int) -> bool:
        deadline = time.monotonic() + WINDOW_PICTURE_WAIT_S
        while True:
            size = self._call("GetSceneItemTransform", {"sceneName": scene, "sceneItemId": item_id})
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
            self._call("GetSourceFilter", {"sourceName": SOURCE_NAME, "filterName": name})
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
                    self._call("RemoveSourceFilter", {"sourceName": SOURCE_NAME, "filterName": name})
            if exists:
                say(f"removed the chroma key filter (the background is {target.background} now)")
            return
        red, green, blue, _ = (round(channel * 255) for channel in parse_colour(target.chroma_colour))
        # OBS colours are 0xAABBGGRR integers; the chroma key ignores the alpha byte.
        settings = {"key_color_type": "custom", "key_color": red | green << 8 | blue << 16, **CHROMA_TUNING}
        if exists:
            self._call("SetSourceFilterSettings", {"sourceName": SOURCE_NAME, "filterName": CHROMA_FILTER_NAME,
                                                   "filterSettings": settings})
            say(f"updated the chroma key filter: key colour {target.chroma_colour}")
        else:
            self._call("CreateSourceFilter", {"sourceName": SOURCE_NAME, "filterName": CHROMA_FILTER_NAME,
                                              "filterKind": "chroma_key_filter_v2", "filterSettings": settings})
            say(f"added a chroma key filter (chroma_key_filter_v2): key colour {target.chroma_colour}")
        if not self._filter_exists(KEY_AT_SOURCE_SIZE_NAME):
            self._call("CreateSourceFilter", {"sourceName": SOURCE_NAME, "filterName": KEY_AT_SOURCE_SIZE_NAME,
                                              "filterKind": KEY_AT_SOURCE_SIZE_KIND, "filterSettings": {}})
            say(f"added {KEY_AT_SOURCE_SIZE_NAME!r} after it, a Color Correction that changes nothing: "
                "with it OBS keys the avatar at its own size and then scales it, leaving no green edge")
        names = [f["filterName"] for f in self._call("GetSourceFilterList", {"sourceName": SOURCE_NAME})["filters"]]
        after_key = names.index(CHROMA_FILTER_NAME) + 1
        if names.index(KEY_AT_SOURCE_SIZE_NAME) != after_key:
            # Filters the user added in between would be drawn at the scaled size instead.
            self._call("SetSourceFilterIndex", {"sourceName": SOURCE_NAME, "filterName": KEY_AT_SOURCE_SIZE_NAME,
                                                "filterIndex": after_key - (names.index(KEY_AT_SOURCE_SIZE_NAME)
                                                                            < after_key)})

    def _mic_inputs(self) -> list[str]:
        """OBS's global microphones (Settings → Audio), else its audio input captures."""
        special = self._call("GetSpecialInputs")
        names = [special[key] for key in ("mic1", "mic2", "mic3", "mic4") if special.get(key)]
        if names:
            return names
        return [item["inputName"] for item in self._call("GetInputList")["inputs"]
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
        self._call("SetInputAudioSyncOffset", {"inputName": names[0], "inputAudioSyncOffset": value})
        others = f"; left as they are: {', '.join(map(repr, names[1:]))}" if names[1:] else ""
        mode_text = f", {mode} mode" if mode else ""
        say(f"set the audio sync offset of the microphone {names[0]!r} to {value} ms (the measured "
            f"mic → mouth delay{mode_text}){others}")

    def _caption(self, source_name: str, text: str, scene: str | None) -> None:
        try:
            self._call("SetInputSettings", {"inputName": source_name, "inputSettings": {"text": text}})
            return
        except ObsRequestError as exc:
            if exc.code != NOT_FOUND:
                raise
        kind, style = CAPTION_KINDS.get(self._platform(), CAPTION_DEFAULT)
        self._create_input(self._scene(scene), source_name, kind, {"text": text, **style})

