"""The API against the real app, as a bot or a tool uses it: `lipsync-studio --headless
--api-port P` in a process of its own, the real voice on the JACK test server, real
clients (websockets, urllib, PyAV to decode, Node.js for the JavaScript example) over
loopback. Every message the server sends is held to its JSON Schema in docs/api.md
(tests/harness/api_client.py)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import wave

import av
import numpy as np
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.harness.api_client import (
    StreamResult,
    check,
    code_blocks,
    http,
    http_json,
    read_stream,
    stream,
)
from tests.harness.app_process import HeadlessApp, api_app, cli, free_port

pytestmark = pytest.mark.audio

TEXT = "Papa made a map of five big boats. Wow, what a view!"
PIECES = ["Papa made a map", " of five big", " boats. Wow,", " what a", " view!"]
RATE = 22050


@pytest.fixture(scope="module")
def app(jack_server, tmp_path_factory):
    """The headless app with the API on, a token for it made at the terminal."""
    running = api_app(tmp_path_factory.mktemp("api"), "tester")
    yield running
    assert running.stop() == 0, running.transcript
    assert "Traceback" not in running.transcript, running.transcript


def _say(config, tmp_path, text: str, mode: str, seed: int) -> np.ndarray:
    out = tmp_path / "say.wav"
    done = cli(config, "say", text, "--mode", mode, "--seed", str(seed), "--wav", str(out))
    assert done.returncode == 0, done.stderr
    with wave.open(str(out)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), "<i2")


def _control(app, token=None, **kwargs):
    headers = {"Authorization": f"Bearer {token or app.token}"} if token is not False else {}
    return connect(f"{app.base.replace('http', 'ws')}/control", additional_headers=headers,
                   open_timeout=20, **kwargs)


def _ask(ws, message: dict, timeout: float = 20, valid: bool = True) -> dict:
    """Send a command (held to its schema unless it is meant to be wrong) and return its
    reply (events between are skipped)."""
    if valid:
        check(message, "client")
    ws.send(json.dumps(message))
    deadline = time.monotonic() + timeout
    while True:
        reply = check(json.loads(ws.recv(timeout=max(0.01, deadline - time.monotonic()))))
        if reply["type"] != "event":
            return reply


# -- streaming speech ---------------------------------------------------------------

@pytest.mark.parametrize("mode", ["balanced", "premium"])
def test_stream_is_the_voice_sample_for_sample_with_cues_ahead_of_their_audio(app, tmp_path, mode):
    got = stream(app.base, app.token, text=TEXT, mode=mode, seed=7)
    assert got.start == {"type": "start", "sample_rate": RATE, "format": "pcm_s16le",
                         "channels": 1, "voice": "en_US-joe-medium", "mode": mode}
    reference = _say(app.config_dir, tmp_path, TEXT, mode, 7)
    # One process made both with the same seed and one engine run each: the same bytes.
    assert np.array_equal(got.samples, reference)
    assert got.end["samples"] == len(reference)
    # Every stretch's cues came before any of its audio: each cues message arrived when
    # less audio had come than where its first viseme starts.
    for before, cues in got.cues:
        assert before / 2 / RATE <= cues["visemes"][0]["start"] + 1e-6
    visemes = got.visemes()
    assert visemes[0]["start"] == 0.0
    assert all(abs(a["end"] - b["start"]) < 1e-5 for a, b in zip(visemes, visemes[1:]))
    # The cues cover the audio to its last sample (rounded to the microsecond).
    assert abs(visemes[-1]["end"] - len(reference) / RATE) < 1e-5
    assert {"PP", "aa", "FF"} <= {v["value"] for v in visemes}  # papa, map, five
    words = [w["word"] for w in got.words()]
    assert words == TEXT.split()
    assert all(0 <= w["start"] < w["end"] <= len(reference) / RATE for w in got.words())


def _longest_quiet(samples: np.ndarray, around: float, window_s: float = 0.6) -> float:
    """The longest run (s) of 5 ms frames under -50 dBFS within window_s of `around`."""
    frame = RATE // 200
    lo, hi = max(0, int((around - window_s) * RATE)), int((around + window_s) * RATE)
    part = samples[lo:hi].astype(np.float64) / 32768
    frames = part[: len(part) // frame * frame].reshape(-1, frame)
    quiet = np.sqrt((frames ** 2).mean(axis=1)) < 10 ** (-50 / 20)
    longest = run = 0
    for q in quiet:
        run = run + 1 if q else 0
        longest = max(longest, run)
    return longest * frame / RATE


def test_text_in_pieces_joins_with_no_gap_the_whole_text_does_not_have(app):
    whole = stream(app.base, app.token, text=TEXT, mode="balanced", seed=3)
    result = StreamResult(opened_at=time.perf_counter())
    url = f"{app.base.replace('http', 'ws')}/stream?mode=balanced&seed=3"
    with connect(url, additional_headers={"Authorization": f"Bearer {app.token}"}) as ws:
        read_stream(ws, result, until_end=False)  # start
        for piece in PIECES:
            ws.send(json.dumps(check({"type": "text", "text": piece}, "client")))
            time.sleep(0.05)  # as an LLM's tokens come
        ws.send(json.dumps({"type": "end"}))
        read_stream(ws, result)
    pieces = result.samples
    assert result.others == []
    # Two texts were released (the sentence at "boats. ", the rest at the end), spoken
    # one after the other: the join is the first sentence's end.
    ends = [w["end"] for w in result.words()]
    join = ends[TEXT.split().index("boats.")]
    ends_whole = [w["end"] for w in whole.words()]
    join_whole = ends_whole[TEXT.split().index("boats.")]
    # The voice pauses between sentences either way (it reads them one at a time). The
    # second text is read as a stream's first acoustic window, the whole text's second
    # sentence as a later one: their durations may round a latent frame (11.6 ms)
    # apart at the join, and quiet is counted in 5 ms frames, one each side. Measured:
    # 199.5 against 184.6 ms; a gap nothing fills would add a chunk's synthesis or more.
    assert _longest_quiet(pieces, join) <= _longest_quiet(whole.samples, join_whole) + 0.0216
    assert abs(len(pieces) - len(whole.samples)) / RATE < 0.2


def test_switch_mode_mid_stream_applies_at_the_next_chunk(app):
    text = " ".join([TEXT] * 4)
    result = StreamResult(opened_at=time.perf_counter())
    url = f"{app.base.replace('http', 'ws')}/stream?mode=balanced&" + \
        f"text={text.replace(' ', '%20').replace('!', '%21')}"
    switched_at = []

    def switch_after_first_chunks(res: StreamResult, message) -> None:
        if len(res.chunks) == 3 and not switched_at:
            ws.send(json.dumps({"cmd": "switch_mode", "mode": "premium", "id": 9}))
            switched_at.append(len(res.chunks))

    with connect(url, additional_headers={"Authorization": f"Bearer {app.token}"}) as ws:
        read_stream(ws, result, on_message=switch_after_first_chunks)
    acks = [m for m in result.others if m["type"] == "mode_switched"]
    assert acks == [{"type": "mode_switched", "mode": "premium", "id": 9}]
    # Balanced chunks are at most 32 frames (16 KiB), premium's up to 64 (32 KiB): the
    # bigger ones come only after the switch.
    sizes = [n for _, n in result.chunks]
    balanced_max = 32 * 256 * 2
    assert max(sizes[:3]) <= balanced_max
    assert max(sizes[switched_at[0]:]) > balanced_max


def test_warmup_says_the_voice_is_warm_on_the_cpu(app):
    status, reply = http_json(app.base, "/warmup", check(
        {"voice": "en_US-joe-medium", "text": " "}, "client", "warmup"), app.token)
    assert status == 200 and reply == {"status": "warmed_up", "engine": "cpu",
                                       "voice": "en_US-joe-medium"}
    status, reply = http_json(app.base, "/v1/warmup", {"voice": "someone-else"}, app.token)
    assert status == 404 and reply["code"] == "unknown_voice"


def _decode(data: bytes) -> tuple[np.ndarray, int]:
    with av.open(io.BytesIO(data)) as container:
        frames = [f.to_ndarray().reshape(-1) for f in container.decode(audio=0)]
        rate = container.streams.audio[0].rate
    samples = np.concatenate(frames)
    if samples.dtype != np.int16:
        samples = np.round(samples.astype(np.float64) * 32767).astype(np.int64)
    return samples, rate


def test_openai_speech_decodes_to_the_voice_in_each_format(app, tmp_path):
    from pipeline.audio.resample import resample

    reference = _say(app.config_dir, tmp_path, TEXT, "balanced", 11).astype(np.float64)
    for fmt in ("wav", "flac", "pcm", "mp3", "opus"):
        status, headers, body = http(app.base, "/v1/audio/speech", check({
            "model": "tts-1", "input": TEXT, "voice": "alloy", "response_format": fmt,
            "speed": 1.0, "seed": 11}, "client", "speech_request"), app.token)
        assert status == 200, body[:300]
        assert headers["X-Lipsync-Voice"] == "en_US-joe-medium"
        if fmt in ("wav", "flac"):
            samples, rate = _decode(body)
            assert rate == RATE and np.array_equal(samples, reference), fmt  # lossless
            continue
        if fmt == "pcm":
            samples, rate = np.frombuffer(body, "<i2").astype(np.float64), 24000
        else:
            samples, rate = _decode(body)
        expected = resample(reference.astype(np.float32) / 32767, RATE, rate) * 32767
        # Lossy codecs add their own delay: align on the cross-correlation peak first.
        n = min(len(samples), len(expected))
        lag = int(np.argmax(np.correlate(samples[:n], expected[:n], "full"))) - (n - 1)
        a = samples[max(0, lag):][: n - abs(lag)]
        b = expected[max(0, -lag):][: len(a)]
        snr = 10 * np.log10((b ** 2).sum() / ((a - b) ** 2).sum())
        # pcm is the same audio resampled twice alike (exact up to rounding): > 60 dB.
        # mp3 and opus at their default bit rates keep speech above 10 dB SNR against the
        # waveform (measured here: mp3 ~18 dB, opus ~12 dB; both perceptual codecs move
        # phase, which a waveform SNR counts against them).
        assert snr > (60 if fmt == "pcm" else 10), (fmt, snr, lag)
        assert abs(len(samples) / rate - len(reference) / RATE) < 0.1, fmt


# -- control ---------------------------------------------------------------------------

def test_speak_over_http_and_control_with_its_events(app):
    from tests.harness.jack_recorder import JackRecorder

    recorder = JackRecorder(max_seconds=8)
    recorder.start()
    try:
        with _control(app) as ws:
            assert _ask(ws, {"type": "subscribe", "events": ["word", "speech_started",
                                                             "speech_finished"], "id": 1}) == {
                "type": "subscribed", "events": ["speech_finished", "speech_started", "word"],
                "id": 1}
            status, reply = http_json(app.base, "/speak", {"text": "Hello from a bot.",
                                                           "mode": "interrupt"}, app.token)
            assert status == 200 and reply["type"] == "speaking"
            events = []
            deadline = time.monotonic() + 20
            while not any(e.get("event") == "speech_finished" for e in events):
                events.append(check(json.loads(ws.recv(timeout=deadline - time.monotonic()))))
            words = [e for e in events if e["event"] == "word"]
            assert len(words) == 4 and all(e["request"] == reply["request"] for e in events)
            # Heard times on the wall clock: in order, within the speech's few seconds.
            heard = [w["start_heard_at"] for w in words]
            assert heard == sorted(heard) and abs(heard[0] - time.time()) < 10
            time.sleep(0.5)
    finally:
        recorder.stop()
    level = np.sqrt((recorder.audio.astype(np.float64) ** 2).mean())
    assert level > 0.003, "the speech was not heard through JACK"
    status, reply = http_json(app.base, "/status", None, app.token)
    assert status == 200 and reply["voice_ready"] and reply["latency_mode"] == "balanced"
    assert reply["metrics"]["heard_first_audio_ms"] > 0
    # No output pulls frames in this app; its heaps are counted (glibc's malloc here), and
    # what lived when the voice was ready is out of the garbage collector's passes.
    assert reply["frames"] == [] and reply["heap"]["python_blocks"] > 10_000
    assert reply["heap"]["malloc_mb"] > 1 and reply["heap"]["frozen_objects"] > 10_000


def test_control_commands_and_their_errors(app):
    with _control(app) as ws:
        assert _ask(ws, {"type": "ping", "id": "p"}) == {"type": "pong", "id": "p"}
        assert _ask(ws, {"type": "set_latency_mode", "mode": "ultra"})["mode"] == "ultra"
        assert _ask(ws, {"type": "status"})["latency_mode"] == "ultra"
        assert _ask(ws, {"type": "set_latency_mode", "mode": "balanced"})["mode"] == "balanced"
        assert _ask(ws, {"type": "set_latency_mode", "mode": "warp"}, valid=False)["code"] == "bad_field"
        assert _ask(ws, {"type": "set_avatar", "avatar": "/no/such/rig.json"})["code"] == "not_found"
        assert _ask(ws, {"type": "set_avatar", "avatar": None})["type"] == "avatar"
        chosen = _ask(ws, {"type": "set_expression", "expression": "happy"})
        assert chosen["type"] == "expression" and chosen["expression"] == "happy"
        assert {"neutral", "happy", "surprised", "angry", "sad"} <= set(chosen["expressions"])
        assert _ask(ws, {"type": "status"})["avatar"]["expression"] == "happy"
        refused = _ask(ws, {"type": "set_expression", "expression": "smug"})
        assert refused["code"] == "not_supported" and "happy" in refused["message"]
        assert _ask(ws, {"type": "set_expression", "expression": "neutral"})["type"] == "expression"
        assert _ask(ws, {"type": "speak", "text": "   "}, valid=False)["code"] == "nothing_to_speak"
        assert _ask(ws, {"type": "append", "text": "Half a", "final": False})["held"] is True
        assert _ask(ws, {"type": "stop"}) == {"type": "stopped"}
        assert _ask(ws, {"type": "subscribe", "events": ["nonsense"]}, valid=False)["code"] == "bad_field"


# -- access ------------------------------------------------------------------------------

def _refused(url: str, headers: dict | None = None) -> tuple[int, dict]:
    with pytest.raises(InvalidStatus) as refused:
        with connect(url, additional_headers=headers or {}, open_timeout=10):
            pass
    response = refused.value.response
    return response.status_code, check(json.loads(response.body))


def test_no_token_a_wrong_one_or_a_foreign_page_is_refused(app):
    ws_base = app.base.replace("http", "ws")
    status, reply = _refused(f"{ws_base}/stream?text=hi")
    assert status == 401 and reply["code"] == "unauthorized"
    status, reply = _refused(f"{ws_base}/stream?text=hi&token=not-a-token")
    assert status == 401 and reply["code"] == "unauthorized"
    status, reply = http_json(app.base, "/speak", {"text": "hi"})
    assert status == 401 and reply["code"] == "unauthorized"
    status, reply = _refused(f"{ws_base}/control?token={app.token}",
                             {"Origin": "https://evil.example"})
    assert status == 403 and reply["code"] == "forbidden_origin"
    status, reply = http_json(app.base, "/stop", {}, app.token,
                              headers={"Origin": "https://evil.example"})
    assert status == 403 and reply["code"] == "forbidden_origin"
    # The app's own origin is welcome (a page served from it).
    status, _ = http_json(app.base, "/stop", {}, app.token, headers={"Origin": app.base})
    assert status == 200
    # Without a token /control takes only a sign-in or a token request.
    with _control(app, token=False) as ws:
        assert _ask(ws, {"type": "status"})["code"] == "unauthorized"
        assert _ask(ws, {"type": "authenticate", "token": "nope"})["code"] == "unauthorized"
        assert _ask(ws, {"type": "authenticate", "token": app.token})["name"] == "tester"
        assert _ask(ws, {"type": "status"})["type"] == "status"


def test_a_token_made_at_the_terminal_works_at_once(app):
    """The server reads its token file again every TOKEN_WATCH_S (0.5 s); a token made
    just before a request must not be refused in that gap (a README quick start made one
    and used it at once)."""
    made = cli(app.config_dir, "api", "token", "create", "newcomer")
    assert made.returncode == 0, made.stderr
    status, reply = http_json(app.base, "/status", None, made.stdout.strip())
    assert status == 200 and reply["type"] == "status", reply
    made = cli(app.config_dir, "api", "token", "create", "newcomer-two")
    with connect(f"{app.base.replace('http', 'ws')}/control") as ws:
        reply = _ask(ws, {"type": "authenticate", "token": made.stdout.strip()})
    assert reply == {"type": "authenticated", "name": "newcomer-two"}


def test_token_requests_are_approved_or_denied_by_the_user_and_revoking_closes(app):
    with _control(app, token=False) as ws:
        ws.send(json.dumps({"type": "request_token", "name": "Chat Bot"}))
        app.output.until("'Chat Bot' asks to control Lipsync Studio", 10)
        app.type("/deny Chat Bot")
        assert check(json.loads(ws.recv(timeout=10)))["code"] == "denied"
        ws.send(json.dumps({"type": "request_token", "name": "Chat Bot"}))
        app.output.until("'Chat Bot' asks to control Lipsync Studio", 10)
        app.type("/approve Chat Bot")
        granted = check(json.loads(ws.recv(timeout=10)))
        assert granted["type"] == "token" and granted["name"] == "Chat Bot"
    token = granted["token"]
    listed = cli(app.config_dir, "api", "token", "list")
    assert "Chat Bot" in listed.stdout and token not in (app.config_dir / "api_tokens.json").read_text()
    with _control(app, token=token) as ws:
        assert _ask(ws, {"type": "ping"})["type"] == "pong"
        revoked = cli(app.config_dir, "api", "token", "revoke", "Chat Bot")
        assert revoked.returncode == 0, revoked.stderr
        # The app watches the token file: the connection is told and closed.
        reply = check(json.loads(ws.recv(timeout=5)))
        assert reply["code"] == "revoked"
        with pytest.raises(Exception):
            ws.recv(timeout=5)
    status, reply = _refused(f"{app.base.replace('http', 'ws')}/control?token={token}&x=1")
    # /control admits a connection without a token (to ask for one), not with a wrong one.
    assert status == 401 and reply["code"] == "unauthorized"


# -- bad input -----------------------------------------------------------------------------

def test_bad_messages_get_their_error_and_the_connection_goes_on(app):
    with _control(app) as ws:
        for message, code in (("{not json", "bad_json"), ("[1, 2]", "bad_message"),
                              ('{"type": "fly"}', "unknown_type"), ('{"no": "type"}', "bad_message"),
                              (json.dumps({"type": "speak", "text": "x" * 2**20}), "too_large")):
            ws.send(message)
            assert check(json.loads(ws.recv(timeout=10)))["code"] == code, message[:40]
        assert _ask(ws, {"type": "ping"})["type"] == "pong"
        time.sleep(1.1)  # a second's allowance again
        # 100 messages in well under a second: 50 are taken (api_messages_per_second, and
        # what it refills while they are sent), the rest refused one by one, saying which.
        for n in range(100):
            ws.send(json.dumps({"type": "ping", "id": n}))
        replies = [check(json.loads(ws.recv(timeout=10))) for _ in range(100)]
        pongs = sum(r["type"] == "pong" for r in replies)
        limited = [r for r in replies if r["type"] == "error"]
        assert 50 <= pongs <= 60 and all(r["code"] == "rate_limited" for r in limited)
        assert "api_messages_per_second" in limited[0]["message"]
        time.sleep(1.1)
        assert _ask(ws, {"type": "ping"})["type"] == "pong"
    status, reply = http_json(app.base, "/speak", b"{oops", app.token)
    assert status == 400 and reply["code"] == "bad_json"
    status, reply = http_json(app.base, "/speak", b"x" * 2**20, app.token)
    assert status == 413 and reply["code"] == "too_large"


def _settled(app, quiet_s: float = 1.0, timeout_s: float = 20.0) -> tuple[int, int]:
    """The app's (threads, sockets) once they have held still for `quiet_s`: a stream of an
    earlier test ends its thread and socket a little after its client went (seen under a
    loaded machine: the baseline then held one of each more than the end)."""
    seen, since = (app.threads(), app.sockets()), time.monotonic()
    deadline = since + timeout_s
    while time.monotonic() - since < quiet_s and time.monotonic() < deadline:
        time.sleep(0.1)
        now = (app.threads(), app.sockets())
        if now != seen:
            seen, since = now, time.monotonic()
    return seen


def _back_to(app, threads: int, sockets: int, timeout_s: float = 20.0) -> None:
    """The app holds no more threads and sockets than `threads` and `sockets` (taken by
    _settled before the test) within `timeout_s`. Fewer is no leak: on a loaded machine
    an earlier test's stream can outlast _settled's quiet second and end meanwhile (seen
    in a full run beside other work: 11 threads after 50 streams against 13 before)."""
    deadline = time.monotonic() + timeout_s
    while (app.threads() > threads or app.sockets() > sockets) and time.monotonic() < deadline:
        time.sleep(0.2)
    now = (app.threads(), app.sockets())
    assert now[0] <= threads and now[1] <= sockets, (now, (threads, sockets))


def test_clients_that_vanish_or_never_read_hold_nothing_and_others_go_on(app):
    threads, sockets = _settled(app)
    rss = app.rss_mb()
    long_text = " ".join([TEXT] * 12)  # ~40 s of speech
    url = f"{app.base.replace('http', 'ws')}/stream?text={long_text.replace(' ', '%20')}"
    headers = {"Authorization": f"Bearer {app.token}"}
    # One leaves after its first audio; one never reads a byte.
    with connect(url, additional_headers=headers) as ws:
        while not isinstance(ws.recv(timeout=20), bytes):
            pass
    # max_queue=1: the client library stops reading the socket once one message waits.
    with connect(url, additional_headers=headers, max_queue=1) as silent:
        other = stream(app.base, app.token, text=TEXT, seed=1)  # meanwhile, one that reads
        assert other.end["samples"] == len(other.samples) > RATE
        time.sleep(3)
        # What the app holds for it is bounded: 32 chunks in its pipe and aiohttp's
        # 256 KiB writer limit (the kernel's loopback buffers take the rest of its 40 s,
        # 1.8 MB, of audio), and its stream stays 8 s of audio ahead of real time at most.
        # Measured 20-22 MB over the three streams (their threads, arenas and buffers).
        assert app.rss_mb() - rss < 40
        silent.socket.close()  # it vanishes without a close handshake
    _back_to(app, threads, sockets)
    # Nor their places among the streams: gone with them (a leak here refused every
    # stream once api_max_streams clients had left mid-stream).
    status, reply = http_json(app.base, "/status", None, app.token)
    assert reply["api"] == {"streams": 0, "connections": 0}


def test_fifty_streams_at_once_each_get_all_their_audio_and_leave_nothing(app):
    threads, sockets = _settled(app)
    rss = app.rss_mb()
    results: list[StreamResult | BaseException] = [None] * 50

    def one(i: int) -> None:
        try:
            results[i] = stream(app.base, app.token, timeout=120, text=f"Viewer number {i}, welcome!",
                                seed=i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            results[i] = exc

    workers = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    for worker in workers:
        worker.start()
    peak = rss
    while any(w.is_alive() for w in workers):
        peak = max(peak, app.rss_mb())
        time.sleep(0.1)
    failed = [r for r in results if isinstance(r, BaseException)]
    assert not failed, failed[:3]
    for result in results:
        assert result.end["samples"] == len(result.samples) > RATE // 2
        assert abs(result.visemes()[-1]["end"] - len(result.samples) / RATE) < 1e-5
    # 50 streams' voices share the engines: a stream's own state is its text's latents
    # and audio (tens of kB), and its thread; measured 50 MB at the peak (with every
    # stream's thread running its own sessions, before the CPU's run queue: 310 MB).
    assert peak - rss < 100, (rss, peak)
    _back_to(app, threads, sockets)


# -- the documented examples ----------------------------------------------------------------

def _example_env(app, tmp_path) -> dict:
    return {**os.environ, "LIPSYNC_API": app.base.replace("http", "ws"),
            "LIPSYNC_TOKEN": app.token, "OUT": str(tmp_path / "speech.wav")}


def test_the_python_example_of_the_docs_runs(app, tmp_path):
    python = code_blocks("python")
    assert len(python) == 1
    (tmp_path / "example.py").write_text(python[0])
    done = subprocess.run([sys.executable, str(tmp_path / "example.py")],
                          env=_example_env(app, tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["seconds"] > 1 and said["visemes"] > 10
    with wave.open(str(tmp_path / "speech.wav")) as w:
        assert w.getframerate() == RATE and w.getnframes() == int(said["seconds"] * RATE)


def test_the_javascript_example_of_the_docs_runs(app, tmp_path):
    javascript = code_blocks("javascript")
    assert len(javascript) == 1
    (tmp_path / "example.mjs").write_text(javascript[0])
    node = shutil.which("node")
    assert node is not None, "make test installs Node.js"
    has_websocket = subprocess.run([node, "--experimental-websocket", "-e", "WebSocket"],
                                   capture_output=True, timeout=30).returncode == 0
    if not has_websocket:  # Node.js before 20.10 (Debian 12's is 18)
        pytest.skip(f"{node} has no WebSocket (Node.js 20.10 or newer has): the JavaScript "
                    "example was not run")
    done = subprocess.run([node, "--experimental-websocket", str(tmp_path / "example.mjs")],
                          env=_example_env(app, tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["finished"] is True and said["words"] >= 3  # "Hello from JavaScript!"


def test_a_network_address_needs_its_own_setting(jack_server, tmp_path):
    running = HeadlessApp(tmp_path, {"audio_output_device": "system", "mic_enabled": False,
                                     "api_enabled": True, "api_port": free_port(),
                                     "api_bind_address": "0.0.0.0"})
    try:
        line = running.output.until("The API is off", 60)
        assert "api_allow_network" in line
    finally:
        assert running.stop() == 0
