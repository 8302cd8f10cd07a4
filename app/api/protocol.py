"""The API's messages: reading what a client sends, and the errors it gets back.

Every error is a reply, never a dropped connection: ``{"type": "error", "code": CODE,
"message": text for a person}``, with the request's ``"id"`` when it had one. CODES maps
each code to the HTTP status it answers with over plain HTTP. The JSON Schema of every
message, both ways, is in docs/api.md (and the tests hold every message to it).

A client message is a JSON object with a ``"type"`` (``"cmd"`` is taken for it too: the
design brief's ``{"cmd": "switch_mode", ...}``).
"""

from __future__ import annotations

import json
from typing import Any

from pipeline.core.json_text import json_float, parse_json

# Error codes, and the HTTP status each answers with.
CODES: dict[str, int] = {
    "bad_json": 400,  # not JSON, or not UTF-8
    "bad_message": 400,  # JSON, but not an object with a "type"
    "unknown_type": 400,
    "bad_field": 400,  # a field missing, of the wrong kind or out of range
    "nothing_to_speak": 400,
    "too_large": 413,  # over api_max_message_bytes
    "rate_limited": 429,  # over api_messages_per_second
    "too_many_streams": 429,  # over api_max_streams
    "unauthorized": 401,  # no token, or not a token we know
    "revoked": 401,  # the connection's token was revoked
    "denied": 403,  # the user denied a token request
    "forbidden_origin": 403,  # a page of another site
    "not_found": 404,
    "unknown_voice": 404,
    "not_supported": 409,  # the avatar has no such thing
    "busy": 409,  # a token request by that name is already waiting
    "approval_timeout": 408,
    "voice_loading": 503,
    "unavailable": 503,  # no audio device, the studio closing
}


class ApiFault(Exception):
    """An error to reply with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        if code not in CODES:
            raise ValueError(f"unknown error code {code!r}")
        self.code = code
        self.message = message

    @property
    def status(self) -> int:
        return CODES[self.code]

    def reply(self, request_id: Any = None) -> dict:
        out = {"type": "error", "code": self.code, "message": self.message}
        if request_id is not None:
            out["id"] = request_id
        return out


def parse(data: str | bytes, limit: int, typed: bool = True) -> dict:
    """The message in `data` (at most `limit` bytes), a JSON object with "type" set
    (unless not `typed`: an HTTP request's body); ApiFault if not."""
    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > limit:
        raise ApiFault("too_large", f"the message has {size} bytes, over the limit of {limit} "
                       "(api_max_message_bytes in the settings): send text in smaller pieces")
    try:
        message = parse_json(data)
    except ValueError as exc:  # not UTF-8, or not JSON
        raise ApiFault("bad_json", f"the message is not JSON ({exc})") from None
    if not isinstance(message, dict):
        raise ApiFault("bad_message", "a message is a JSON object, "
                       f"not {type(message).__name__}")
    if not typed:
        return message
    kind = message.get("type", message.get("cmd"))
    if not isinstance(kind, str):
        raise ApiFault("bad_message", 'the message has no "type" (a string)')
    message["type"] = kind
    return message


def request_id(message: dict) -> Any:
    """The client's "id" for matching replies: a string or number, else None."""
    value = message.get("id")
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def field(message: dict, name: str, kind: type | tuple[type, ...], *, required: bool = True,
          default: Any = None, choices: tuple | None = None,
          low: float | None = None, high: float | None = None) -> Any:
    """Field `name` of `message`, checked; ApiFault("bad_field") naming what is wrong."""
    if name not in message or message[name] is None:
        if required:
            raise ApiFault("bad_field", f'"{name}" is missing')
        return default
    value = message[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        value = json_float(value)
        if value is None:
            raise ApiFault("bad_field", f'"{name}" is far too large a number')
    if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
        names = " or ".join(k.__name__ for k in kinds).replace("str", "string")
        raise ApiFault("bad_field", f'"{name}" must be a {names}')
    if choices is not None and value not in choices:
        raise ApiFault("bad_field", f'"{name}" must be one of {", ".join(map(str, choices))}, '
                       f"not {value!r}")
    if low is not None and not low <= value <= high:
        raise ApiFault("bad_field", f'"{name}" must be between {low:g} and {high:g}, not {value!r}')
    return value


def dumps(message: dict) -> str:
    """A reply as JSON text (NaN and infinities are not JSON: callers send null).

    A client's string echoed back (a request's "id") may hold a lone surrogate (JSON a
    client may send), which no UTF-8 text can: such a reply is written in ASCII, JSON's
    escapes giving the client its own string back. Written as it was, a reply on a
    WebSocket raised UnicodeEncodeError in the handler, which ended the connection.
    """
    text = json.dumps(message, ensure_ascii=False, allow_nan=False)
    try:
        text.encode()
    except UnicodeEncodeError:
        return json.dumps(message, ensure_ascii=True, allow_nan=False)
    return text
