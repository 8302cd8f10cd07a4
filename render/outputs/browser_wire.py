"""The browser source's wire format: the messages between its server
(render/outputs/browser_source.py) and the page (assets/web/avatar.js), made and read
here, apart from any socket.

Server → page: a binary message per frame, ``HEADER`` (magic ``LSF2``, frame
number u32, media time f64, canvas width and height, the visible rectangle's x, y, width
and height (u16 each; everything outside it is transparent), encoding u8, little-endian)
then the rectangle as **straight** (un-premultiplied) RGBA, rows top to bottom, what a
canvas's ``putImageData`` takes: raw bytes, or a PNG the page decodes with
``createImageBitmap`` (off its main thread). Text messages are JSON:
the caption event of the app's catalogue (pipeline.core.events, the form the API
sends) with its style, ``{"type": "event", "event": "caption", "text": text, "style":
{...}}``, and clock probes ``{"sync": n}``. Page → server:
``{"painted": frame_number, "t": ms, "ready": ms}`` after each paint (``ready``: when
the frame was ready to paint) and ``{"sync": n, "t": ms}``
answering a probe, ``t`` being the page's ``performance.now()`` (decode_page_message
reads them; anything else a client sends is not one of them, and the server counts it as
``ignored``).

Encoding: PNG by default, or raw; chosen by bench/browser_delay.py on the 2-core EPYC VM,
shared with other jobs (bench/results/browser_delay.json is the last of 5 runs at load
averages 3-8; figures here are their ranges; a 6th run, in a load spike to 11, had
P99s over 1 s), for the bundled avatar. Per frame, encode ms / bytes / page decode and
paint ms:

    ==========================  =========================  ===========================
    encoding                    512×512 (428×472 shown)    1280×720 (602×664 shown)
    ==========================  =========================  ===========================
    raw, visible rectangle      1.1-2.1 / 808 KB / 0.1-0.2  3.3-4.2 / 1.6 MB / 0.3-0.4
    raw, whole frame            1.4-2.0 / 1.0 MB / 0.1      4.6-7.2 / 3.7 MB / 0.3-0.4
    png (ours)                  4.6-6.3 / 66 KB / 2.8-4.8   8.1-11.8 / 107 KB / 6.2-8.7
    zlib, DecompressionStream   4.1-6.2 / 66 KB / 5.5-8.4   7.3-10.5 / 107 KB / 10-13
    webp lossless (Pillow, m0)  8.6-15 / 63 KB / 4.9-6.7    11-18 / 97 KB / 10-13
    ==========================  =========================  ===========================

Raw is the cheapest to make and to paint, but headless Chromium takes WebSocket data in
at only 20-50 MB/s here (16 KB to 1 MB messages), using most of a core, so raw frames
reached the page at 10-28 fps (512²) and 8-13 fps (720p), 60-109 and 120-229 ms after
publish (P50); PNG frames at 37-54 and 17-40 fps, 20-35 and 45-64 ms (P99 63-155 and
80-281). The goal, 1 frame + 10 ms (26.7 ms), is met at P50 for 512² in the quieter runs
only, never at P99 or at 720p here: the browser took 0.65-1.2 cores and this process
(encoder and server) 0.25-0.63 of the 2 that the other jobs also used. Drawing the
avatar from its state in the page (not built): ~184 bytes a frame and no encoding, but
painting three decoded layers took 2.5-4.9 ms (512²) and 7.7-8 ms (720p), no less than
decoding our PNG, and it needs a second renderer per rig kind in JavaScript (a WebGL
mesh warp for photo rigs) kept identical to the GL one, to save the encoder's 5-12 ms.

Un-premultiplying: ``send`` takes premultiplied RGBA (the GL output's). Pixels with
alpha 0 or 255 are the same either way; the partially transparent ones (an avatar's
outline: 0.3-0.7 % of the pixels) are fixed with a 256×256 lookup table of
round(255·c/a), exact: the canvas premultiplies back to the published values (tested in
Chromium for every alpha). A rectangle with more than ``DENSE_FRACTION`` of them (a
translucent background) goes through Pillow's C conversion instead (6 ms rather than
24 ms for a 1280×720 frame), which truncates: within 1/255 of the published
premultiplied values once the canvas premultiplies back.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from PIL import Image

from pipeline.core.events import CaptionShown, event_json
from pipeline.core.json_text import json_float, parse_json

MAGIC = b"LSF2"
# magic, frame number, media time, canvas width and height, the rectangle sent (x, y,
# width, height; everything outside it is transparent), encoding, 3 bytes of padding.
HEADER = struct.Struct("<4sIdHHHHHHB3x")
MAX_SIDE = 65535  # the header's u16
RAW, PNG = "raw", "png"
ENCODINGS = (RAW, PNG)
_ENCODING_CODES = {RAW: 0, PNG: 1}
# PNGs are made here, not by Pillow: rows unfiltered and deflated at level 1. Pillow's
# adaptive row filters tripled the encode time (9.6 against 2.8 ms for the 512² avatar)
# and made the flat-shaded art larger (84 against 66 KB).
PNG_LEVEL = 1
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DENSE_FRACTION = 1 / 8
CAPTION_STYLE_KEYS = ("position", "color", "background", "font-family", "font-size",
                      "font-weight", "text-shadow")
CAPTION_POSITIONS = ("bottom", "top")

# round(255·c/a) for a in 1..255, c in 0..255, clipped (c ≤ a in valid premultiplied input).
_UNPREMULTIPLY = np.zeros((256, 256), np.uint8)
_UNPREMULTIPLY[1:] = np.minimum(
    255, np.floor(np.arange(256)[None, :] * 255.0 / np.arange(1, 256)[:, None] + 0.5))
_UNPREMULTIPLY_FLAT = _UNPREMULTIPLY.ravel()


def unpremultiply(premultiplied: np.ndarray, out: np.ndarray) -> None:
    """Straight RGBA of H×W×4 uint8 premultiplied RGBA, written into `out` (same shape);
    either may have any strides."""
    np.copyto(out, premultiplied)
    # alpha - 1 wraps 0 to 255, so one comparison finds 1..254.
    partial = (out[..., 3] - np.uint8(1)) < 254
    count = np.count_nonzero(partial)
    if count > DENSE_FRACTION * partial.size:
        h, w = premultiplied.shape[:2]
        image = Image.frombuffer("RGBa", (w, h), np.ascontiguousarray(premultiplied),
                                 "raw", "RGBa", 0, 1)
        np.copyto(out, np.asarray(image.convert("RGBA")))
    elif count:
        ys, xs = np.nonzero(partial)
        pixels = out[ys, xs]
        rows = pixels[:, 3:].astype(np.intp) << 8
        out[ys, xs, :3] = _UNPREMULTIPLY_FLAT[rows + pixels[:, :3]]


def visible_bounds(premultiplied: np.ndarray) -> tuple[int, int, int, int]:
    """x, y, width, height of the smallest rectangle holding every pixel that is not fully
    transparent; (0, 0, 0, 0) for a frame that is all transparent. `premultiplied` is
    C-contiguous: a valid premultiplied pixel is transparent exactly when its 4 bytes,
    read as one 32-bit word, are 0."""
    seen = premultiplied.view(np.uint32)[..., 0] != 0
    rows = np.flatnonzero(seen.any(1))
    if not rows.size:
        return 0, 0, 0, 0
    cols = np.flatnonzero(seen[rows[0]:rows[-1] + 1].any(0))
    return int(cols[0]), int(rows[0]), int(cols[-1] - cols[0] + 1), int(rows[-1] - rows[0] + 1)


def encode_frame(premultiplied: np.ndarray, seq: int, media_time: float,
                 encoding: str) -> bytes | bytearray:
    """The message for one frame: HEADER, then the visible rectangle as straight RGBA,
    raw or as a PNG. `premultiplied` is C-contiguous H×W×4 uint8."""
    h, w = premultiplied.shape[:2]
    x, y, rw, rh = visible_bounds(premultiplied)
    fields = (MAGIC, seq & 0xFFFFFFFF, media_time, w, h, x, y, rw, rh)
    crop = premultiplied[y:y + rh, x:x + rw]
    if not rw:
        return HEADER.pack(*fields, _ENCODING_CODES[RAW])
    if encoding == RAW:
        # Un-premultiplied straight into the message: one buffer, no further copy.
        message = bytearray(HEADER.size + rw * rh * 4)
        HEADER.pack_into(message, 0, *fields, _ENCODING_CODES[RAW])
        unpremultiply(crop, np.frombuffer(message, np.uint8, offset=HEADER.size)
                      .reshape(rh, rw, 4))
        return message
    # PNG rows are a filter byte (0: none) then the pixels; un-premultiplied in place.
    rows = np.zeros((rh, 1 + rw * 4), np.uint8)
    unpremultiply(crop, rows[:, 1:].reshape(rh, rw, 4))
    return b"".join((HEADER.pack(*fields, _ENCODING_CODES[PNG]), _PNG_SIGNATURE,
                     _png_chunk(b"IHDR", struct.pack(">IIBBBBB", rw, rh, 8, 6, 0, 0, 0)),
                     _png_chunk(b"IDAT", zlib.compress(rows, PNG_LEVEL)),
                     _png_chunk(b"IEND", b"")))


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return b"".join((struct.pack(">I", len(data)), kind, data,
                     struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))))




def caption_message(text: str, style: Mapping[str, str] | None = None) -> str:
    """The text message showing `text` in the page (empty hides it). `style`: CSS values
    for the keys in CAPTION_STYLE_KEYS; "position" is "bottom" (default) or "top";
    ValueError for any other."""
    style = dict(style or {})
    unknown = sorted(set(style) - set(CAPTION_STYLE_KEYS))
    if unknown:
        raise ValueError(f"caption style keys {unknown} are not among {CAPTION_STYLE_KEYS}")
    if style.get("position", "bottom") not in CAPTION_POSITIONS:
        raise ValueError(f"caption position {style['position']!r} is not one of "
                         f"{CAPTION_POSITIONS}")
    return json.dumps({**event_json(CaptionShown(str(text))), "style": style})


def probe_message(n: int) -> str:
    """Clock probe number `n`: the page answers at once with its time (ProbeAnswer)."""
    return json.dumps({"sync": n})


@dataclass(frozen=True)
class ProbeAnswer:
    n: int
    t_s: float  # the page's performance.now(), seconds


@dataclass(frozen=True)
class Painted:
    seq: int  # the frame number painted
    t_s: float  # when, on the page's clock (seconds)
    ready_s: float | None  # when it was ready to paint, where the page said


def decode_page_message(message: str | bytes) -> ProbeAnswer | Painted | None:
    """What a page's message says; None for anything else (not JSON, not UTF-8, no
    finite "t", neither a probe's answer nor a paint)."""
    try:
        data = parse_json(message)
    except ValueError:  # not JSON, or not UTF-8
        return None
    t = json_float(data.get("t")) if isinstance(data, dict) else None
    if t is None or not math.isfinite(t):
        return None
    t /= 1e3
    if "sync" in data:
        return ProbeAnswer(data["sync"], t) if isinstance(data["sync"], int) else None
    if "painted" in data and isinstance(data["painted"], int):
        ready = json_float(data.get("ready"))
        finite = ready is not None and math.isfinite(ready)
        return Painted(data["painted"], t, ready / 1e3 if finite else None)
    return None
