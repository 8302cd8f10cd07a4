"""A client of the app's API for tests and benchmarks, with real sockets (websockets and
urllib), that holds every message the server sends to its JSON Schema in docs/api.md."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import numpy as np
from websockets.sync.client import connect

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def schemas() -> dict[str, dict]:
    """Every message schema of docs/api.md by its $id."""
    blocks = re.findall(r"```json schema\n(.*?)```", API_DOC.read_text(), re.S)
    found = {}
    for block in blocks:
        schema = json.loads(block)
        jsonschema.Draft202012Validator.check_schema(schema)
        found[schema["$id"]] = schema
    return found


def _types(schema: dict) -> list[str]:
    kind = schema.get("properties", {}).get("type", {})
    return [kind["const"]] if "const" in kind else kind.get("enum", [])


# (message type, sender) → its schema; the warm-up answer has no type.
_SCHEMAS = {(t, schema["x-sender"]): schema for schema in schemas().values()
            for t in _types(schema) or [schema["$id"]]}


def check(message: dict, sender: str = "server", kind: str | None = None) -> dict:
    """`message`, after checking it against the schema of its type (or `kind`: an HTTP
    body's, which has none) and sender (AssertionError if docs/api.md has none for it,
    or it does not fit)."""
    kind = kind or ("warmed_up" if message.get("status") == "warmed_up"
                    else message.get("type", message.get("cmd")))
    schema = _SCHEMAS.get((kind, sender))
    assert schema is not None, f"docs/api.md has no schema for {sender} message {message!r}"
    jsonschema.validate(message, schema)
    return message


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", API_DOC.read_text(), re.S)


@dataclass
class StreamResult:
    start: dict | None = None
    cues: list[tuple[int, dict]] = field(default_factory=list)  # (audio bytes before it, cues)
    chunks: list[tuple[float, int]] = field(default_factory=list)  # (arrival, bytes)
    others: list[dict] = field(default_factory=list)
    end: dict | None = None
    audio: bytearray = field(default_factory=bytearray)
    opened_at: float = 0.0

    @property
    def samples(self) -> np.ndarray:
        return np.frombuffer(bytes(self.audio), "<i2")

    @property
    def ttfb_s(self) -> float | None:
        return self.chunks[0][0] - self.opened_at if self.chunks else None

    def visemes(self) -> list[dict]:
        return [v for _, cues in self.cues for v in cues["visemes"]]

    def words(self) -> list[dict]:
        return [w for _, cues in self.cues for w in cues["words"]]


def read_stream(ws, result: StreamResult, timeout: float = 60, until_end: bool = True,
                on_message=None) -> StreamResult:
    """Read `ws` (a /stream connection) into `result` until its end message."""
    deadline = time.monotonic() + timeout
    while result.end is None:
        message = ws.recv(timeout=max(0.01, deadline - time.monotonic()))
        if isinstance(message, bytes):
            result.chunks.append((time.perf_counter(), len(message)))
            result.audio += message
        else:
            data = check(json.loads(message))
            if data["type"] == "start":
                result.start = data
            elif data["type"] == "cues":
                result.cues.append((len(result.audio), data))
            elif data["type"] == "end":
                result.end = data
            else:
                result.others.append(data)
        if on_message is not None:
            on_message(result, message)
        if not until_end:
            break
    return result


def stream(base: str, token: str, timeout: float = 60, **query) -> StreamResult:
    """One /stream request with `query` (text=..., mode=..., seed=...), read to its end."""
    url = f"{base.replace('http', 'ws', 1)}/stream?" + urllib.parse.urlencode(query)
    result = StreamResult(opened_at=time.perf_counter())
    with connect(url, additional_headers={"Authorization": f"Bearer {token}"},
                 open_timeout=30, max_size=None) as ws:
        return read_stream(ws, result, timeout)


def http(base: str, path: str, body: dict | bytes | None = None, token: str | None = None,
         headers: dict | None = None, method: str | None = None) -> tuple[int, dict, bytes]:
    """(status, headers, body) of one request; JSON bodies are encoded here."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    request = urllib.request.Request(f"{base}{path}", data=data, method=method,
                                     headers={**({"Authorization": f"Bearer {token}"} if token else {}),
                                              "Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def http_json(*args, **kwargs) -> tuple[int, dict]:
    status, _, body = http(*args, **kwargs)
    return status, check(json.loads(body))

