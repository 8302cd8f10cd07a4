"""The API's speech endpoints: `/stream` (WebSocket: audio with its cues, the latency mode
switched mid-stream, text in pieces), `POST /warmup`, and `POST /v1/audio/speech` in
OpenAI's request shape. Each request speaks with a voice stream of its own
(speech_stream.py); the studio's voice is not touched, so the app's own speech goes on.

When speech starts for text in pieces: at the first complete sentence (a sentence mark
followed by white space, or a line break), at a clause mark (, ; : —) once over
CLAUSE_CHARS characters are held, at a word gap once over 200 are held, or at a
``flush`` / ``end`` (pipeline/text/incremental.py has the rule; Engine.append uses it too).
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from app.api.audio_formats import FORMATS, Encoder
from app.api.channel import TOKEN_NAME, Channel, incoming
from app.api.protocol import ApiFault, field, parse
from app.api.speech_stream import Cues, Finished, SpeechStream
from pipeline.core.modes import MODE_NAMES
from pipeline.text.input import TextInputError, prepare_text
from pipeline.voice.streaming_tts import VOICE_NAME, StreamingTTS

log = logging.getLogger(__name__)

# A request made while the voice loads waits this long for it (the app's start).
VOICE_WAIT_S = 60.0
VOICES = (VOICE_NAME,)
# OpenAI's voice names: tools send one of these by default, so each speaks with our voice
# (the reply's X-Lipsync-Voice header says so, and the log).
OPENAI_VOICES = frozenset({"alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx",
                           "sage", "shimmer", "verse", "marin", "cedar"})
# OpenAI's models as latency modes: tts-1 is their fast one, tts-1-hd their best.
OPENAI_MODELS = {"tts-1": "balanced", "tts-1-hd": "premium", "gpt-4o-mini-tts": "balanced"}
RATE_RANGE = (0.5, 2.0)  # the voice's speaking rates (Settings.speech_rate)


def _voice_name(value) -> str:
    if value in (None, "", "default", VOICE_NAME):
        return VOICE_NAME
    raise ApiFault("unknown_voice", f"there is no voice {value!r}: the voices are "
                   + ", ".join(VOICES))


def _mode(value, default: str) -> str:
    if value in (None, ""):
        return default
    if value not in MODE_NAMES:
        raise ApiFault("bad_field", f'"mode" must be one of {", ".join(MODE_NAMES)}, not {value!r}')
    return value


def _number(query, name: str, kind: type, low: float, high: float):
    text = query.get(name)
    if text is None:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise ApiFault("bad_field", f'"{name}" must be a number, not {text!r}') from None
    if not low <= value <= high:
        raise ApiFault("bad_field", f'"{name}" must be between {low:g} and {high:g}, not {text}')
    return value


def _voice_factory(server, voice: StreamingTTS):
    """Voice streams of the studio's loaded `voice`'s batch sizes: on a GPU the same
    warm engines, whose runs of concurrent streams go together (Studio.voice_batch_sizes).
    Each is made by `with_seed` from one voice per provider and sizes, kept by the server:
    a voice made anew checks its files again, and those stat calls held the loop 48.2 ms
    (P50) a request beside 8 busy threads, against 0.041 ms (bench/stream_voice.py,
    bench/results/stream_voice_2vcpu_xeon.json)."""
    key = (server.studio.settings.inference_provider, voice.batch_sizes)
    made = server.stream_voices.get(key)
    if made is None:
        made = server.stream_voices[key] = StreamingTTS(provider=key[0], batch_sizes=key[1])
    return made.with_seed


class _StreamSlot:
    """A place among the concurrent streams (api_max_streams), held while it runs."""

    def __init__(self, server) -> None:
        self._server = server
        if server.streams >= server.config.max_streams:
            raise ApiFault("too_many_streams", f"{server.streams} streams are running, the "
                           f"limit (api_max_streams in the settings): try again when one ends")
        server.streams += 1

    def release(self) -> None:
        if self._server is not None:
            self._server.streams -= 1
            self._server = None


# -- /stream --------------------------------------------------------------------------

async def stream_socket(server, request: web.Request) -> web.StreamResponse:
    # Synthesis starts before the handshake is answered: the text is in the URL, and the
    # client's round trip for the upgrade then overlaps the first chunk's making.
    stream = slot = fault = None
    query = request.query
    try:
        slot = _StreamSlot(server)
        voice = _voice_name(query.get("voice"))
        mode = _mode(query.get("mode"), server.studio.settings.latency_mode)
        rate = _number(query, "rate", float, *RATE_RANGE) or 1.0
        seed = _number(query, "seed", int, 0, 2**63 - 1)
        text = query.get("text")
        if text is not None:
            prepare_text(text)  # nothing to speak is said before any work
        loaded = await server.voice()
        stream = SpeechStream(_voice_factory(server, loaded), mode=mode, length_scale=1.0 / rate,
                              seed=seed, loop=asyncio.get_running_loop(),
                              runner=server.stream_workers, cues_worker=server.cues_worker)
        if text is not None:
            stream.say(text)
    except TextInputError as exc:
        fault = ApiFault("nothing_to_speak", str(exc))
    except ApiFault as refused:
        fault = refused
    ws = web.WebSocketResponse(max_msg_size=server.hard_cap, compress=False)
    channel = Channel(ws, request)
    try:
        await ws.prepare(request)
        server.sockets[ws] = request[TOKEN_NAME]
        if fault is not None:
            await channel.fault(fault)
            return ws
        ignored = sorted(set(query) - {"text", "voice", "mode", "rate", "seed", "token"})
        start = {"type": "start", "sample_rate": stream.sample_rate, "format": "pcm_s16le",
                 "channels": 1, "voice": voice, "mode": mode}
        if ignored:
            start["ignored"] = ignored  # e.g. the brief's steps=: there is nothing to set
        await channel.send(start)
        # Whichever ends first ends the other: the stream's end, or the client leaving
        # (then its audio is not made, and its place among the streams is free at once).
        reader = asyncio.create_task(_read_stream_messages(server, ws, channel, stream))
        writer = asyncio.create_task(_send_stream(channel, stream))
        try:
            await asyncio.wait((reader, writer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            reader.cancel()
            writer.cancel()
    finally:
        if stream is not None:
            stream.cancel()
        if slot is not None:
            slot.release()
        server.sockets.pop(ws, None)
        await channel.close()
    return ws


async def _send_stream(channel: Channel, stream: SpeechStream) -> None:
    while True:
        item = await stream.next()
        if isinstance(item, bytes):
            sent = await channel.send_bytes(item)
        elif isinstance(item, Cues):
            sent = await channel.send(item.message())
        elif isinstance(item, ApiFault):
            sent = await channel.fault(item)
        else:
            assert isinstance(item, Finished)
            await channel.send(item.message())
            return
        if not sent:
            return


async def _read_stream_messages(server, ws, channel: Channel, stream: SpeechStream) -> None:
    limit = server.rate_limit(lambda: server.sockets.get(ws))
    async for data, reply_to in incoming(ws, channel, limit, server.config.max_message_bytes):
        try:
            kind = data["type"]
            if kind == "text":
                stream.push(field(data, "text", str))
            elif kind == "flush":
                stream.flush()
            elif kind == "end":
                stream.finish()
            elif kind == "switch_mode":
                mode = field(data, "mode", str, choices=MODE_NAMES)
                stream.switch_mode(mode)
                await channel.send({"type": "mode_switched", "mode": mode, **_id(reply_to)})
            elif kind == "ping":
                await channel.send({"type": "pong", **_id(reply_to)})
            else:
                raise ApiFault("unknown_type", f"/stream takes text, flush, end, switch_mode and "
                               f"ping messages, not {kind!r}")
        except ApiFault as fault:
            await channel.fault(fault, reply_to)


def _id(reply_to) -> dict:
    return {} if reply_to is None else {"id": reply_to}


# -- /warmup --------------------------------------------------------------------------

async def warmup(server, request: web.Request) -> web.Response:
    try:
        body = await json_body(server, request)
        _voice_name(body.get("voice"))
        tts = await server.voice()
    except ApiFault as fault:
        return server.fault_response(fault)
    # The voice's engines are all warm once it is loaded (Engine.load_voice warms every
    # shape); the fastest provider among them names the engine.
    used = {choice.used for choice in tts.providers.values()}
    engine = next(name for name in ("tensorrt", "cuda", "cpu") if name in used)
    return web.json_response({"status": "warmed_up", "engine": engine, "voice": VOICE_NAME})


async def json_body(server, request: web.Request) -> dict:
    """The request's JSON object ({} for an empty body)."""
    raw = await request.read()
    return parse(raw, server.config.max_message_bytes, typed=False) if raw else {}


# -- OpenAI's speech ------------------------------------------------------------------

async def openai_speech(server, request: web.Request) -> web.StreamResponse:
    """POST /v1/audio/speech: {model, input, voice, response_format, speed} (and our
    seed), the audio streamed in the format asked for as it is made."""
    slot = None
    try:
        body = await json_body(server, request)
        text = field(body, "input", str)
        prepare_text(text)
        asked_voice = field(body, "voice", str, required=False)
        voice = VOICE_NAME if asked_voice in OPENAI_VOICES else _voice_name(asked_voice)
        model = field(body, "model", str, required=False, default="tts-1")
        mode = OPENAI_MODELS.get(model) or _mode(model, server.studio.settings.latency_mode)
        fmt = field(body, "response_format", str, required=False, default="mp3", choices=FORMATS)
        speed = field(body, "speed", float, required=False, default=1.0, low=RATE_RANGE[0],
                      high=RATE_RANGE[1])
        seed = field(body, "seed", int, required=False, low=0, high=2**63 - 1)
        slot = _StreamSlot(server)
        loaded = await server.voice()
    except TextInputError as exc:
        return _openai_fault(server, ApiFault("nothing_to_speak", str(exc)))
    except ApiFault as fault:
        if slot is not None:
            slot.release()
        return _openai_fault(server, fault)
    if asked_voice and asked_voice != voice:
        log.info("OpenAI voice %r asked for: speaking with %s", asked_voice, voice)
    stream = SpeechStream(_voice_factory(server, loaded), mode=mode, length_scale=1.0 / speed,
                          seed=seed, loop=asyncio.get_running_loop(),
                          runner=server.stream_workers, with_cues=False)
    encoder = Encoder(fmt, stream.sample_rate)
    response = web.StreamResponse(headers={
        "Content-Type": encoder.content_type, "X-Lipsync-Voice": voice,
        "X-Lipsync-Mode": mode, "Cache-Control": "no-store"})
    response.enable_chunked_encoding()
    try:
        await response.prepare(request)
        stream.say(text)
        while True:
            item = await stream.next()
            if isinstance(item, bytes):
                data = encoder.encode(item)
            elif isinstance(item, Finished):
                await response.write(encoder.finish())
                break
            else:
                # A fault after the start can only end the body early (its status is
                # sent): the log says why.
                log.warning("/v1/audio/speech: %s", item.message)
                continue
            if data:
                await response.write(data)
        await response.write_eof()
    except (ConnectionError, asyncio.CancelledError):
        stream.cancel()
        raise
    finally:
        stream.cancel()
        slot.release()
    return response


def _openai_fault(server, fault: ApiFault) -> web.Response:
    # Our error shape, and OpenAI's "error" object beside it for tools that read that.
    return server.fault_response(fault, {"error": {
        "message": fault.message, "type": "invalid_request_error", "code": fault.code}})
