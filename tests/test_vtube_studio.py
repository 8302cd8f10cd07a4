"""Our lip sync on a VTube Studio model (render/outputs/vtube_studio.py), over real sockets
against tests/harness/vtube_studio_server.py: VTube Studio's plugin API as its public
documentation gives it (VTube Studio has no Linux build)."""

from __future__ import annotations

import json
import socket
import threading
import time
from contextlib import contextmanager

import pytest
from websockets.sync.client import connect

from pipeline.core.clock import MediaClock
from pipeline.core.frames import PhonemeTiming
from pipeline.core.mouth_shapes import mouth_shape
from pipeline.voice.speech_timeline import SpeechTimeline
from pipeline.voice.viseme_track import VisemeTrack
from render.outputs.vtube_studio import (
    CONTESTED_RETRY_S,
    MAX_IN_FLIGHT,
    PARAMETERS,
    PLUGIN_DEVELOPER,
    PLUGIN_NAME,
    VOWEL_PARAMETERS,
    VTubeStudioOutput,
)
from tests.harness import vtube_studio_server as vts
from tests.harness.vtube_studio_server import VTubeStudioServer

PLUGIN = (PLUGIN_NAME, PLUGIN_DEVELOPER)
REST = {"MouthOpen": 0.0, "MouthSmile": 0.5, **dict.fromkeys(VOWEL_PARAMETERS, 0.0)}


@pytest.fixture
def server():
    s = VTubeStudioServer()
    s.start()
    yield s
    s.stop()


def wait_for(predicate, timeout: float = 5.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what} did not hold within {timeout} s")


@contextmanager
def output(port: int, **options):
    """A VTubeStudioOutput; closing it must leave no thread of its own behind."""
    before = set(threading.enumerate())
    out = VTubeStudioOutput("127.0.0.1", port, **options)
    try:
        yield out
    finally:
        started = time.monotonic()
        out.close()
        closing = time.monotonic() - started
        left = [t.name for t in threading.enumerate()
                if t not in before and t.name != "vtube-studio-harness"]
        assert not left, f"close() left threads: {left}"
        assert closing < 2.0, f"close() took {closing:.2f} s"


def state_is(out, state: str, detail_has: str = ""):
    """A predicate for wait_for: the status, once it is `state` with `detail_has` in its
    detail."""
    def check():
        status = out.status()
        return status if status.state == state and detail_has in status.detail else None

    return check


def ours(server) -> list[vts.Injection]:
    return server.applied(PLUGIN_NAME)


# -- the token ------------------------------------------------------------------------

def test_the_first_connection_asks_for_a_token_and_the_next_uses_it(server):
    tokens: list[str] = []
    with output(server.port, on_token=tokens.append) as out:
        wait_for(state_is(out, "on"), what="on")
        assert len(tokens) == 1 and server.tokens[tokens[0]] == PLUGIN
        assert server.token_requests == 1
        assert "MouthOpen" in out.status().detail
        # The vowels, as VTube Studio's parameter list shows them to the user.
        listed = _parameter_list(server.url, tokens[0])
        for name in VOWEL_PARAMETERS:
            assert {k: listed[name][k] for k in ("addedBy", "min", "max", "defaultValue")} \
                == {"addedBy": PLUGIN_NAME, "min": 0, "max": 1, "defaultValue": 0}
    with output(server.port, token=tokens[0], on_token=tokens.append) as out:
        wait_for(state_is(out, "on"), what="on with the stored token")
        assert server.token_requests == 1 and len(tokens) == 1
        assert out.status().figures["token_requests"] == 0


def test_a_user_who_denies_is_told_and_not_asked_again(server):
    server.user_allows = None  # the user takes their time
    with output(server.port) as out:
        wait_for(lambda: server.prompt_open, what="VTube Studio's prompt")
        status = out.status()
        assert status.state == "waiting"
        assert status.detail == "Allow Lipsync Studio in VTube Studio: click Allow in its " \
                                "plugin prompt"
        server.answer(False)
        status = wait_for(state_is(out, "trouble"), what="the denial in the status")
        assert status.problem.startswith("You denied Lipsync Studio in VTube Studio. It asks "
                                         "again when VTube Studio restarts")
        time.sleep(0.5)
        # Still running, quietly: no new prompt, nothing sent, the status as it was.
        assert "vtube-studio" in {t.name for t in threading.enumerate()}
        assert server.token_requests == 1 and not server.prompt_open
        assert not server.injections
        assert out.status().problem == status.problem


def test_a_revoked_token_is_forgotten_and_asked_for_again(server):
    tokens: list[str] = []
    with output(server.port, on_token=tokens.append) as out:
        wait_for(state_is(out, "on"))
        server.revoke(PLUGIN_NAME)  # errorID 50 on the next injection
        wait_for(lambda: len(tokens) == 2 and out.status().state == "on", what="a new token")
        assert tokens[0] != tokens[1] and server.token_requests == 2
        # Revoking deleted our parameters; they are made again and sent again.
        assert set(VOWEL_PARAMETERS) <= set(server.custom_parameters)
        since = time.monotonic()
        wait_for(lambda: [i for i in ours(server) if i.arrived > since], what="injections")
    # An old token VTube Studio no longer knows (authenticated false) is asked for again.
    with output(server.port, token=tokens[0], on_token=tokens.append) as out:
        wait_for(lambda: len(tokens) == 3 and out.status().state == "on", what="a third token")
        assert server.token_requests == 3


# -- what is sent -----------------------------------------------------------------------

def test_injections_come_at_the_frame_rate_while_the_mouth_is_still(server):
    fps, window = 30.0, 1.5
    with output(server.port, fps=fps) as out:
        wait_for(state_is(out, "on"))
        start = time.monotonic()
        time.sleep(window)
        end = time.monotonic()
        arrivals = [i for i in ours(server) if start <= i.arrived < end]
        status = out.status()
    # The ticker hands over one frame per grid point (points missed in a stall are
    # skipped, never made up) and each frame is sent once: at most one request a period
    # (+1 for where the window cuts the grid); under load, frames late or replaced.
    assert 0.8 * fps * window <= len(arrivals) <= fps * window + 1, len(arrivals)
    # A still mouth is re-sent all the same: VTube Studio never lets it go (1 s).
    times = [start] + [i.arrived for i in arrivals] + [end]
    assert max(b - a for a, b in zip(times, times[1:])) < 0.5 * vts.LOST_AFTER_S
    assert all(i.values == REST and i.mode == "set" and not i.face_found for i in arrivals)
    assert status.figures["sent"] >= len(arrivals) and status.figures["errors"] == 0
    # Closed: within a second the mouth is back to what VTube Studio's tracking says.
    closed = time.monotonic()
    assert server.controller("MouthOpen", closed) == PLUGIN_NAME
    assert server.controller("MouthOpen", closed + vts.LOST_AFTER_S + 0.05) is None
    assert server.value("MouthOpen", closed + vts.LOST_AFTER_S + 0.05) == \
        vts.DEFAULT_PARAMETERS["MouthOpen"][2]


def test_a_busy_vtube_studio_gets_no_backlog_and_the_ticker_keeps_time(server):
    fps, busy = 60.0, 0.5
    with output(server.port, fps=fps) as out:
        wait_for(state_is(out, "on"))
        before = out.status().figures
        server.pause()  # it reads nothing, answers nothing
        time.sleep(busy)
        during = out.status().figures
        server.resume()
        resumed = time.monotonic()
        wait_for(lambda: [i for i in ours(server) if i.arrived > resumed + 0.1],
                 what="injections after it is back")
        status = out.status()
    # At most MAX_IN_FLIGHT unanswered requests; the ticks meanwhile replace each other
    # in the mailbox (dropped) and the ticker never waited: its rate held.
    assert during["sent"] - before["sent"] <= MAX_IN_FLIGHT
    assert during["dropped"] - before["dropped"] >= 0.8 * fps * busy - MAX_IN_FLIGHT
    assert during["fps"] > 0.9 * fps
    assert status.state == "on"


def _speech() -> VisemeTrack:
    """A second of clearly different mouth shapes, each held 100-130 ms."""
    visemes = ["sil", "aa", "PP", "ih", "ou", "E", "oh", "SS", "aa", "FF", "oh", "sil"]
    durations = [0.05, 0.13, 0.1, 0.12, 0.12, 0.11, 0.13, 0.1, 0.12, 0.1, 0.13, 0.05]
    timings, t = [], 0.0
    for viseme, duration in zip(visemes, durations):
        timings.append(PhonemeTiming(viseme, viseme, t, t + duration))
        t += duration
    return VisemeTrack(timings)


def test_values_are_the_mouth_heard_when_vtube_studio_shows_them(server):
    fps, offset = 60.0, 0.15
    period = 1 / fps
    clock = MediaClock(48_000)  # free-running on the system clock: no sound card
    timeline = SpeechTimeline()
    track = _speech()
    with output(server.port, fps=fps, offset_s=offset) as out:
        out.set_sources(timeline.frame_pose, clock.media_time_at, timeline.version)
        wait_for(state_is(out, "on"))
        # The ticker's latency estimate is a running mean (gain 0.1 a tick): by now,
        # 0.6 s and more of ticks, it is within a few µs of the offset.
        time.sleep(0.6)
        start = clock.media_time_now() + 0.3
        timeline.schedule(track, start)
        end = start + track.duration
        time.sleep(clock.monotonic_at(end) - offset + 0.1 - time.monotonic())
    checked = misses = misses_without_offset = 0
    for injection in ours(server):
        heard = clock.media_time_at(injection.arrived + offset)
        if not start <= heard <= end:
            continue
        checked += 1
        misses += _outside(injection.values, timeline, heard, period)
        misses_without_offset += _outside(injection.values, timeline,
                                          clock.media_time_at(injection.arrived), period)
    assert checked >= 0.8 * fps * track.duration, checked
    assert misses == 0, f"{misses} of {checked} values were not the heard mouth"
    # The check tells: shown at arrival instead, a third and more of them would be wrong.
    assert misses_without_offset > checked / 3, misses_without_offset


def _outside(values: dict, timeline: SpeechTimeline, heard: float, period: float) -> bool:
    """Whether `values` are not the mouth of any frame starting within one period + 20 ms
    of `heard`.

    Why that bound: at heard time h the presenter shows the frame spanning [h, h + p)
    (its spans are kept within p/8 of the heard times of the ticks); the ticker
    predicts h from a running mean of its ticks' hand-over delays, so a tick later or
    earlier than the mean shifts it by that difference; and the arrival time here comes
    after the hand-over by the loop's wake-up, the send and the server's read: well
    under a millisecond on an idle machine, up to ~20 ms on this 2-core one shared with
    other test runs. Each value must lie within what mouth_shape gives over those frames
    (sampled every millisecond)."""
    low, high = {}, {}
    t = heard - period - 0.02
    while t <= heard + period + 0.02:
        shape = mouth_shape(timeline.frame_pose(t, period))
        expected = dict(zip(PARAMETERS, (shape.open, 0.5 * (shape.form + 1.0), *shape.vowels)))
        for name, value in expected.items():
            low[name] = min(low.get(name, value), value)
            high[name] = max(high.get(name, value), value)
        t += 0.001
    return any(not low[n] - 1e-9 <= values[n] <= high[n] + 1e-9 for n in PARAMETERS)


# -- when VTube Studio says no, or is not there ---------------------------------------

def test_another_plugin_controlling_mouth_open_is_reported_and_the_rest_still_sent(server):
    server.hold("MouthOpen", plugin="VBridger")
    with output(server.port) as out:
        status = wait_for(state_is(out, "trouble"), what="the contested parameter")
        assert status.problem.startswith("Another plugin is controlling MouthOpen in VTube "
                                         "Studio, so Lipsync Studio cannot move it")
        since = time.monotonic()
        wait_for(lambda: [i for i in ours(server) if i.arrived > since], what="injections")
        assert server.controller("LipsyncStudioA") == PLUGIN_NAME
        assert server.controller("MouthOpen") == "VBridger"
        server.release("MouthOpen")  # the other plugin stops
        wait_for(lambda: server.controller("MouthOpen") == PLUGIN_NAME
                 and out.status().state == "on", timeout=CONTESTED_RETRY_S + 2.0,
                 what="MouthOpen ours again")
        assert out.status().problem is None


def test_a_vowel_parameter_deleted_in_vtube_studio_is_created_again(server):
    with output(server.port) as out:
        wait_for(state_is(out, "on"))
        server.delete_parameter("LipsyncStudioA")  # the next injection gets errorID 453
        since = time.monotonic()
        wait_for(lambda: [i for i in ours(server)
                          if i.arrived > since and "LipsyncStudioA" in i.values],
                 what="LipsyncStudioA created and sent again")
        assert server.custom_parameters["LipsyncStudioA"]["addedBy"] == PLUGIN_NAME
        assert out.status().state == "on"


def test_it_reconnects_by_itself_when_vtube_studio_restarts(server):
    with output(server.port) as out:
        wait_for(state_is(out, "on"))
        server.stop()
        # The first retry comes 1 s after the connection closed, and finds nothing.
        status = wait_for(state_is(out, "waiting", "not running"), timeout=3.0,
                          what="not running")
        assert status.detail.startswith(f"VTube Studio is not running at 127.0.0.1:"
                                        f"{server.port}")
        server.start()  # same port, tokens and parameters kept
        restarted = time.monotonic()
        # The backoff doubles from 1 s to at most 5 s; one failed try: back within 2 s.
        wait_for(state_is(out, "on"), timeout=4.0, what="on again")
        wait_for(lambda: [i for i in ours(server) if i.arrived > restarted])
        assert out.status().figures["connections"] == 2
        assert server.token_requests == 1  # the token was kept, not asked for again


def test_without_vtube_studio_it_waits_and_says_where_it_looked():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nothing listens there
    with output(port) as out:
        status = wait_for(state_is(out, "waiting", "not running"))
        assert status.problem is None
        assert status.detail == (f"VTube Studio is not running at 127.0.0.1:{port}, or its "
                                 "plugin API is off (in VTube Studio: Settings → Start API); "
                                 "trying again")
        assert status.figures["sent"] == 0


# -- the harness keeps VTube Studio's documented rules --------------------------------

def _request(ws, message_type: str, data: dict | None = None, **envelope) -> dict:
    message = {"apiName": "VTubeStudioPublicAPI", "apiVersion": "1.0",
               "requestID": "test", "messageType": message_type, "data": data or {},
               **envelope}
    ws.send(json.dumps(message))
    return json.loads(ws.recv(timeout=5))


def _error(answer: dict) -> int | None:
    return answer["data"]["errorID"] if answer["messageType"] == "APIError" else None


def _parameter_list(url: str, token: str) -> dict:
    with connect(url) as ws:
        answer = _request(ws, "AuthenticationRequest", {
            "pluginName": PLUGIN_NAME, "pluginDeveloper": PLUGIN_DEVELOPER,
            "authenticationToken": token})
        assert answer["data"]["authenticated"] is True
        answer = _request(ws, "InputParameterListRequest")
    return {p["name"]: p for p in answer["data"]["customParameters"]}


def test_the_harness_answers_as_the_documentation_says(server):
    with connect(server.url) as ws:
        ws.send("not json")
        assert _error(json.loads(ws.recv(timeout=5))) == vts.JSON_INVALID
        assert _error(_request(ws, "APIStateRequest", apiName="Other")) == vts.API_NAME_INVALID
        assert _error(_request(ws, "")) == vts.REQUEST_TYPE_MISSING
        assert _error(_request(ws, "NoSuchRequest")) == vts.REQUEST_TYPE_UNKNOWN
        state = _request(ws, "APIStateRequest")
        assert state["requestID"] == "test" and isinstance(state["timestamp"], int)
        assert state["data"]["currentSessionAuthenticated"] is False
        assert _error(_request(ws, "InjectParameterDataRequest")) == vts.REQUIRES_AUTHENTICATION
        assert _error(_request(ws, "AuthenticationTokenRequest", {
            "pluginName": "ab", "pluginDeveloper": "Tester"})) == vts.PLUGIN_NAME_INVALID
        token = _request(ws, "AuthenticationTokenRequest", {
            "pluginName": "Test Plugin", "pluginDeveloper": "Tester"})["data"]
        token = token["authenticationToken"]
        assert _request(ws, "AuthenticationRequest", {
            "pluginName": "Test Plugin", "pluginDeveloper": "Tester",
            "authenticationToken": "wrong"})["data"]["authenticated"] is False
        assert _request(ws, "AuthenticationRequest", {
            "pluginName": "Test Plugin", "pluginDeveloper": "Tester",
            "authenticationToken": token})["data"]["authenticated"] is True

        def create(name: str, **values) -> int | None:
            return _error(_request(ws, "ParameterCreationRequest", {
                "parameterName": name, "min": 0, "max": 1, "defaultValue": 0, **values}))

        assert create("bad name") == vts.PARAM_NAME_INVALID
        assert create("MouthOpen") == vts.PARAM_DEFAULT_NAME_NOT_ALLOWED
        assert create("TestParam", max=2e6) == vts.PARAM_VALUES_INVALID
        assert create("TestParam") is None and create("TestParam") is None  # again: fine

        def inject(*values, mode="set") -> dict:
            return _request(ws, "InjectParameterDataRequest",
                            {"mode": mode, "parameterValues": list(values)})

        assert _error(inject()) == vts.INJECT_NO_DATA
        unknown = inject({"id": "Nope", "value": 0})
        assert _error(unknown) == vts.INJECT_PARAM_NOT_FOUND
        assert "Nope" in unknown["data"]["message"]
        assert _error(inject({"id": "TestParam", "value": 2e6})) == vts.INJECT_VALUE_INVALID
        assert _error(inject({"id": "TestParam", "value": 1, "weight": 1.5})) == \
            vts.INJECT_WEIGHT_INVALID
        assert _error(inject({"id": "TestParam", "value": 1}, mode="mix")) == \
            vts.INJECT_MODE_UNKNOWN
        assert inject({"id": "TestParam", "value": 0.7})["messageType"] == \
            "InjectParameterDataResponse"
        assert server.value("TestParam") == 0.7
        server.hold("MouthOpen")
        taken = inject({"id": "MouthOpen", "value": 1})
        assert _error(taken) == vts.INJECT_PARAM_CONTROLLED_BY_OTHER_PLUGIN
        assert "MouthOpen" in taken["data"]["message"]
        server.revoke("Test Plugin")
        assert _error(inject({"id": "FaceAngleX", "value": 1})) == vts.TOKEN_REQUEST_DENIED
