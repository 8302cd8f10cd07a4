"""render/outputs/frame_size.py: the one reading of a size, in every form either of its
uses took (the settings' sizes, a video's --size), and each use's own limits after it."""

import pytest

from app.settings import OUTPUT_SIDES, Settings, validate
from render.outputs.frame_size import SizeError, parse_size
from render.outputs.video_export import ExportError, video_size


@pytest.mark.parametrize("text, size", [
    ("720p", (1280, 720)), ("1080p", (1920, 1080)), (" 1080P ", (1920, 1080)),
    ("800x600", (800, 600)), ("800X600", (800, 600)), ("800×600", (800, 600)),
    (" 800 x 600 ", (800, 600)), ("8x8", (8, 8)), ("0x0", (0, 0)),
])
def test_every_form_either_use_took(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "huge", "800", "800x", "x600", "800x600x2", "-800x600",
                                  "800.5x600", "²x600", "800 600", "4k", "1" * 5000 + "x600"])
def test_anything_else_names_the_forms(text):
    with pytest.raises(SizeError, match=r"is not WIDTHxHEIGHT in pixels \(e\.g\. 1280x720\), "
                                        r"720p or 1080p"):
        parse_size(text)


def test_each_use_holds_the_size_to_its_own_limits():
    lo, hi = OUTPUT_SIDES
    for text in (f"{lo}x{hi}", "720p", "1280×720"):
        assert validate({"output_size": text}) == (Settings(output_size=text), [])
    for text in (f"{lo - 1}x100", f"100x{hi + 1}", "huge"):
        _, problems = validate({"output_size": text})
        assert len(problems) == 1 and "must be 720p, 1080p or WIDTHxHEIGHT" in problems[0]
    assert video_size("1280 × 720") == video_size("720p") == (1280, 720)
    for text, why in (("wide", "is not WIDTHxHEIGHT"), ("8x8", "each side must be 16 to 4096"),
                      ("8000x720", "each side must be 16 to 4096"),
                      ("161x120", "needs even width and height")):
        with pytest.raises(ExportError, match=why):
            video_size(text)
