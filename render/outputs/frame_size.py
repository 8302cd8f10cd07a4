"""A frame size as a user types it: "720p", "1080p" or WIDTHxHEIGHT in pixels ("1280x720",
"1280X720", "1280×720", spaces around the numbers allowed). The one reading of every size
the app takes (the settings' output and camera sizes, a video's --size); each use then
holds the size to its own limits (the output window: app/settings.py; an H.264 video:
render/outputs/video_export.py's check_size)."""

from __future__ import annotations

import re

SIZE_PRESETS = {"720p": (1280, 720), "1080p": (1920, 1080)}
_WIDTH_X_HEIGHT = re.compile(r"\s*(\d+)\s*[x×]\s*(\d+)\s*", re.ASCII | re.IGNORECASE)


class SizeError(ValueError):
    """Not a size; the message names the forms a size takes."""


def parse_size(text: str) -> tuple[int, int]:
    """(width, height) in pixels for `text`; SizeError for anything else."""
    preset = SIZE_PRESETS.get(text.strip().lower())
    if preset is not None:
        return preset
    match = _WIDTH_X_HEIGHT.fullmatch(text)
    try:
        if match is not None:
            return int(match[1]), int(match[2])
    except ValueError:  # more digits than int() converts (4,300)
        pass
    raise SizeError(f"{_shown(text)} is not WIDTHxHEIGHT in pixels (e.g. 1280x720), 720p or 1080p")


def _shown(text: str, most: int = 40) -> str:
    """`text` quoted for a message, cut short where it is long."""
    return repr(text if len(text) <= most else text[:most] + "…")
