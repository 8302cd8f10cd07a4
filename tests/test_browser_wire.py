"""render/outputs/browser_wire.py on its own, no socket and no browser: the frame messages
(header, visible rectangle, straight RGBA raw or as PNG), the caption and probe messages,
and what is read of a page's messages. tests/test_browser_source.py shows the same
messages painted by a real Chromium."""

import io
import json

import numpy as np
import pytest
from PIL import Image

from render.outputs.browser_wire import (
    DENSE_FRACTION,
    HEADER,
    MAGIC,
    PNG,
    RAW,
    Painted,
    ProbeAnswer,
    caption_message,
    decode_page_message,
    encode_frame,
    probe_message,
    visible_bounds,
)
from tests.harness.premultiplied import avatar_frame, premultiply


def _straight_pixels(message: bytes | bytearray) -> tuple[tuple, np.ndarray]:
    """The header's fields and the rectangle's straight RGBA, as the page reads them."""
    fields = HEADER.unpack_from(message)
    rw, rh, code = fields[7], fields[8], fields[9]
    payload = bytes(message[HEADER.size:])
    if code == 1:
        pixels = np.asarray(Image.open(io.BytesIO(payload)).convert("RGBA"))
    else:
        pixels = np.frombuffer(payload, np.uint8).reshape(rh, rw, 4)
    return fields, pixels


@pytest.mark.parametrize("encoding, code", [(RAW, 0), (PNG, 1)])
def test_a_frame_is_its_header_and_its_visible_rectangle_straight(encoding, code):
    frame = avatar_frame(320, 240)
    x, y, w, h = visible_bounds(frame)
    assert (x, y) > (0, 0) and (w, h) < (320, 240)  # the disc, not the whole frame
    assert not frame[:y].any() and not frame[y + h:].any()
    assert not frame[:, :x].any() and not frame[:, x + w:].any()
    fields, pixels = _straight_pixels(encode_frame(frame, 7, 12.5, encoding))
    assert fields == (MAGIC, 7, 12.5, 320, 240, x, y, w, h, code)
    # The lookup table's exact rounding (few partial pixels): premultiplied back, the
    # published values exactly.
    assert np.count_nonzero((frame[..., 3] > 0) & (frame[..., 3] < 255)) < DENSE_FRACTION * w * h
    np.testing.assert_array_equal(premultiply(pixels), frame[y:y + h, x:x + w])


@pytest.mark.parametrize("encoding", [RAW, PNG])
def test_a_translucent_frame_comes_back_within_one_level(encoding):
    # Every pixel partially transparent: Pillow's truncating conversion, within 1/255 of
    # the published premultiplied values, alpha exact.
    y, x = np.mgrid[0:64, 0:256]
    straight = np.stack([x, (x * 3 + y) % 256, y * 2, (x + 256 * y) % 254 + 1], -1).astype(np.uint8)
    frame = premultiply(straight)
    _, pixels = _straight_pixels(encode_frame(frame, 0, 0.0, encoding))
    diff = np.abs(premultiply(pixels).astype(int) - frame.astype(int))
    assert diff.max() <= 1 and (diff[..., 3] == 0).all()


def test_a_transparent_frame_is_a_header_alone_and_numbers_wrap_at_32_bits():
    message = encode_frame(np.zeros((90, 160, 4), np.uint8), 2**32 + 5, 1.0, PNG)
    assert len(message) == HEADER.size
    assert HEADER.unpack(message) == (MAGIC, 5, 1.0, 160, 90, 0, 0, 0, 0, 0)


def test_caption_and_probe_messages():
    shown = json.loads(caption_message("Hello", {"position": "top", "color": "red"}))
    assert shown == {"type": "event", "event": "caption", "text": "Hello",
                     "style": {"position": "top", "color": "red"}}
    assert json.loads(caption_message(""))["style"] == {}
    with pytest.raises(ValueError, match="onclick"):
        caption_message("x", {"onclick": "alert(1)"})
    with pytest.raises(ValueError, match="middle"):
        caption_message("x", {"position": "middle"})
    assert json.loads(probe_message(3)) == {"sync": 3}


def test_what_a_page_says_is_read_and_anything_else_is_not():
    assert decode_page_message('{"sync": 3, "t": 1500}') == ProbeAnswer(3, 1.5)
    assert decode_page_message('{"painted": 9, "t": 2000, "ready": 1990}') == Painted(9, 2.0, 1.99)
    assert decode_page_message(b'{"painted": 9, "t": 2000}') == Painted(9, 2.0, None)
    assert decode_page_message('{"painted": 9, "t": 2000, "ready": "soon"}').ready_s is None
    assert decode_page_message('{"painted": 9, "t": 2000, "ready": 1e999}').ready_s is None
    garbage = ["not json", "[1, 2]", "42", '"t"', "{}", '{"t": "soon"}', '{"t": NaN}',
               '{"t": 1, "sync": "x"}', '{"t": 1, "painted": "x"}', '{"t": 1, "what": 1}',
               b"\x00\xff binary", "\udcff".encode("utf-8", "surrogatepass"),
               '{"sync": 1}', '{"painted": 1, "t": Infinity}', '{"t": true, "sync": 1}',
               '{"t": 1e999, "sync": 1}', "[" * 5000, '{"t": 1' + "0" * 5000 + ', "sync": 1}']
    assert [decode_page_message(g) for g in garbage] == [None] * len(garbage)
