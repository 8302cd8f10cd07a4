"""Fuzz targets for the servers a client on this computer talks to, driven for real over
loopback: the API (`lipsync-studio --headless --api-port P` in a process of its own:
/control and /stream WebSockets and the HTTP routes, docs/api.md) and the browser
source's WebSocket (render/outputs/browser_source.py, started here as the app starts
it). Each bad message gets its documented answer (the API: an error of docs/api.md's
schema on the same connection; the browser source: ignored and counted) and the server
stays up: a good request on the same connection still works after it, and the app's
output has no traceback."""

from __future__ import annotations

import itertools
import json
import socket
import time
import urllib.parse

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from app.api.protocol import CODES, ApiFault, field, parse
from render.outputs.browser_source import MAX_CLIENT_MESSAGE, BrowserSource
from tests.fuzzing import EDGE_NUMBERS, EDGE_STRINGS, any_text, deep, dumps, examples, json_values, mutated
from tests.harness.api_client import check, http
from tests.harness.app_process import api_app, free_port

# Example counts: an API exchange takes 5-40 ms over loopback to the headless app (a
# fresh connection each), the browser source's ~5 ms; with the app's start (~15 s,
# the voice loading) this file takes ~35 s of the suite's ~90 s for fuzzing.
COMMANDS = ("ping", "speak", "append", "stop", "set_latency_mode", "set_avatar",
            "set_expression", "status", "subscribe", "unsubscribe", "authenticate")
# Field names the commands read, so generated messages reach their checks.
FIELDS = ("type", "cmd", "id", "text", "mode", "final", "avatar", "expression", "events",
          "token", "name", "voice", "input", "model", "response_format", "speed", "seed")
field_values = st.one_of(json_values, st.sampled_from(EDGE_NUMBERS + EDGE_STRINGS),
                         st.sampled_from(("all", "caption", "ultra", "balanced", "interrupt",
                                          "happy", "neutral", "mp3", "wav", "pcm")))


@st.composite
def commands(draw, kinds=COMMANDS):
    """A message of a known type with fields drawn from those the commands read."""
    message = draw(st.dictionaries(st.sampled_from(FIELDS), field_values, max_size=4))
    message["type"] = draw(st.one_of(st.sampled_from(kinds), any_text))
    return message


def _wire(value) -> str | bytes:
    return value if isinstance(value, str | bytes) else dumps(value)


def _frame(message: str | bytes) -> str | bytes:
    """A WebSocket frame of `message`: text, or its bytes in a binary frame where it
    holds what UTF-8 cannot (a lone surrogate), which a text frame cannot carry."""
    try:
        message.encode() if isinstance(message, str) else None
    except UnicodeEncodeError:
        return message.encode("utf-8", "surrogatepass")
    return message


# What a client may send: commands, any JSON, text that is not JSON, JSON cut or changed.
messages = st.one_of(
    commands().map(_wire), json_values.map(_wire), any_text,
    mutated(b'{"type": "set_latency_mode", "mode": "ultra", "id": 1}'),
    st.just(deep(3000)))


@examples(300)
@given(st.one_of(messages, st.binary(max_size=40)))
def test_a_message_parses_or_is_an_api_fault(data):
    try:
        message = parse(data, 65536)
    except ApiFault as fault:
        assert fault.code in CODES and fault.message
        return
    assert isinstance(message, dict) and isinstance(message["type"], str)
    for name in FIELDS:
        for kind in (str, float, int, bool, list):
            try:
                field(message, name, kind, required=False, low=0 if kind in (float, int) else None,
                      high=10 if kind in (float, int) else None)
            except ApiFault as fault:
                assert fault.code == "bad_field"


# -- the API, running --------------------------------------------------------------------

@pytest.fixture(scope="module")
def app(jack_server, tmp_path_factory):
    """The headless app with the API on, a token for it made at the terminal."""
    # Requests come back to back, with a /status after each to show the server is up:
    # past the default 50 a second (a fast machine) they were refused as a flood, which
    # tests/test_faults.py covers; here the limit is the setting's highest.
    running = api_app(tmp_path_factory.mktemp("api-fuzz"), "fuzzer",
                      api_messages_per_second=10_000)
    yield running
    assert running.stop() == 0, running.transcript
    assert "Traceback" not in running.transcript, running.transcript


_ids = itertools.count()


def _exchange(ws, message, timeout: float = 20.0) -> list[dict]:
    """Send `message`, then a ping; every JSON message the server sends until the pong,
    each held to its schema (audio, bytes, is skipped)."""
    ws.send(_frame(message))
    marker = f"fuzz-{next(_ids)}"
    ws.send(json.dumps({"type": "ping", "id": marker}))
    got, deadline = [], time.monotonic() + timeout
    while True:
        reply = ws.recv(timeout=max(0.01, deadline - time.monotonic()))
        if isinstance(reply, bytes):
            continue
        reply = check(json.loads(reply))
        if reply.get("id") == marker:
            assert reply["type"] == "pong"
            return got
        got.append(reply)


def _headers(app) -> dict:
    return {"Authorization": f"Bearer {app.token}"}


def _no_token_requests(message) -> bool:
    # A token request waits for the user's answer (two minutes): not a message to fuzz
    # with one after another.
    return not (isinstance(message, str | bytes) and b"request_token" in
                (message if isinstance(message, bytes) else message.encode("utf-8", "surrogatepass")))


@examples(120)
@given(message=messages.filter(_no_token_requests))
@example(message=json.dumps({"type": "subscribe", "events": [[]]}))
@example(message=json.dumps({"type": "authenticate", "token": "\ud800"}))
@example(message=_wire({"type": "ping", "id": "\ud800"}))
@example(message=deep(3000))
def test_control_answers_every_message_and_stays_up(app, message):
    with connect(f"{app.ws}/control", additional_headers=_headers(app), open_timeout=20,
                 max_size=None) as ws:
        replies = _exchange(ws, message)
        for reply in replies:
            if reply["type"] == "error":
                assert reply["code"] in CODES and reply["message"]


@examples(60)
@given(message=messages, query=st.dictionaries(
    st.sampled_from(("voice", "mode", "rate", "seed", "x")), st.one_of(
        any_text, st.sampled_from(("", "1e999", "nan", "-1", "9" * 5000, "0.5", "ultra"))),
    max_size=3))
# Found: a request line over aiohttp's 8,190 bytes was refused in plain text, with a
# traceback in the app's log.
@example(message="{}", query={"seed": "9" * 9000})
# Found by bench/fuzz.py (issue 26): an answer echoing an "id" with a lone surrogate
# raised in the handler, which closed the connection.
@example(message=_wire({"type": "append", "id": "\udfff"}), query={})
def test_stream_answers_every_message_and_stays_up(app, message, query):
    url = f"{app.ws}/stream?" + urllib.parse.urlencode(
        {k: v.encode("utf-8", "surrogatepass") for k, v in query.items()})
    with connect(url, additional_headers=_headers(app), open_timeout=20, max_size=None) as ws:
        first = check(json.loads(ws.recv(timeout=20)))
        if first["type"] == "error":  # refused before it started: said, then closed
            assert first["code"] in CODES
            return
        replies = _exchange(ws, message)
        for reply in replies:
            if reply["type"] == "error":
                assert reply["code"] in CODES and reply["message"]


ROUTES = ("/speak", "/stop", "/status", "/warmup", "/v1/audio/speech", "/v1/speak", "/nope",
          "/control", "/stream")


@examples(80)
@given(route=st.sampled_from(ROUTES), method=st.sampled_from(("GET", "POST", "PUT", "OPTIONS")),
       body=st.one_of(st.none(), messages.map(lambda m: m if isinstance(m, bytes) else
                                              m.encode("utf-8", "surrogatepass")),
                      commands(("speak", "stop")).map(lambda m: dumps(m).encode("utf-8", "surrogatepass")),
                      st.builds(lambda m: dumps(m).encode("utf-8", "surrogatepass"), st.fixed_dictionaries(
                          {"input": st.sampled_from(["", " ", "Hi."])},
                          optional={"speed": field_values, "voice": field_values,
                                    "model": field_values, "response_format": field_values,
                                    "seed": field_values}))),
       token=st.one_of(st.none(), st.sampled_from(["", "nope", "é", "\x7f"])))
# Found: the router answered a route or method that is not there in plain text.
@example(route="/speak", method="GET", token=None, body=None)
@example(route="/control", method="GET", token=None, body=None)
# Found by bench/fuzz.py: a plain GET of /stream closed a socket never opened (500).
@example(route="/stream", method="GET", token=None, body=None)
@example(route="/v1/audio/speech", method="POST", token=None,
         body=b'{"input": "Hi.", "speed": 1' + b"0" * 400 + b"}")
def test_http_answers_every_request_and_stays_up(app, route, method, body, token):
    headers = _headers(app) if token is None else {"Authorization": f"Bearer {token}"}
    status, response_headers, data = http(app.base, route, body if method != "GET" else None,
                                          headers=headers, method=method)
    kind = response_headers.get("Content-Type", "")
    if status == 200 and kind.startswith("audio/"):
        assert data  # speech, as asked
    elif status == 400 and kind.startswith("text/plain"):
        # Not HTTP aiohttp can read (a header of bytes no header may hold): refused by
        # it before any route, in its words.
        assert token is not None and any(ord(c) < 32 or ord(c) == 127 for c in token)
    elif status >= 400:
        reply = check(json.loads(data))
        assert reply["type"] == "error" and CODES[reply["code"]] == status
    assert http(app.base, "/status", None, app.token)[0] == 200


def test_a_header_that_is_not_text_is_refused_and_the_api_stays_up(app):
    # A raw request with bytes no header may hold (a lone surrogate's UTF-8-ish bytes).
    with socket.create_connection(("127.0.0.1", int(app.base.rsplit(":", 1)[1])), 10) as s:
        s.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xed\xa0\x80\r\n"
                  b"Connection: close\r\n\r\n")
        answer = s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 4")
    assert http(app.base, "/status", None, app.token)[0] == 200


def test_no_token_at_all_is_refused_on_stream(app):
    with pytest.raises(InvalidStatus) as refused:
        with connect(f"{app.ws}/stream", open_timeout=10):
            pass
    assert refused.value.response.status_code == 401


# -- the browser source ----------------------------------------------------------------

@pytest.fixture(scope="module")
def browser_source():
    source = BrowserSource(free_port())
    source.start()
    yield source
    source.stop()


page_messages = st.one_of(
    messages.filter(lambda m: len(m) <= MAX_CLIENT_MESSAGE),
    st.fixed_dictionaries({}, optional={
        "t": field_values, "sync": field_values, "painted": field_values, "ready": field_values,
    }).map(dumps),
    st.just(deep(2000)))


def _client(source, peer):
    client = next((c for c in source.stats().clients if c.peer == peer), None)
    assert client is not None, "the server dropped the client"
    return client


@examples(150)
@given(message=page_messages)
@example(message=json.dumps({"t": 10**400}))
@example(message=deep(2000))
def test_the_browser_source_ignores_what_it_cannot_use_and_stays_up(browser_source, message):
    with connect(f"ws://127.0.0.1:{browser_source.port}/ws", open_timeout=10) as ws:
        peer = "%s:%d" % ws.socket.getsockname()[:2]
        deadline = time.monotonic() + 10
        while not any(c.peer == peer for c in browser_source.stats().clients):
            assert time.monotonic() < deadline
            time.sleep(0.005)
        before = _client(browser_source, peer)
        ws.send(_frame(message))
        # The good request after it: a paint acknowledged is counted.
        ws.send(json.dumps({"painted": 0, "t": 1.0}))
        while True:
            now = _client(browser_source, peer)
            if now.painted > before.painted:
                break
            assert time.monotonic() < deadline, "the good message after it was never taken"
            time.sleep(0.005)
        # The bad one is counted as ignored, or was a message the page may send.
        assert now.ignored - before.ignored in (0, 1)
        assert now.painted - before.painted in (1, 2)
