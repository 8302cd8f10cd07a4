"""What an output shows behind the avatar: transparent, a solid colour, or a chroma key,
and the colour strings users type for them.

Colours are read by Pillow's parser: `#rrggbb`, `#rrggbbaa`, `#rgb` and the CSS colour
names (`green`, `DarkSlateGray`, ...). Everything here is plain values: the compositor
(render/gl/compositor.py) turns a Background into pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

from PIL import ImageColor

TRANSPARENT = "transparent"
SOLID = "solid"
CHROMA = "chroma"
BACKGROUND_MODES = (TRANSPARENT, SOLID, CHROMA)

COLOUR_FORMS = "#rrggbb, #rrggbbaa, #rgb or a colour name such as green"


class ColourError(ValueError):
    """A colour string that is none of COLOUR_FORMS; the message says so."""


def parse_colour(text: str) -> tuple[float, float, float, float]:
    """Straight RGBA in 0..1 for a colour string; ColourError names the forms accepted."""
    if not isinstance(text, str) or not text.strip():
        raise ColourError(f"{text!r} is not a colour: use {COLOUR_FORMS}")
    spec = text.strip()
    # Pillow also takes rgb()/hsl() functions; users are told of the forms above only,
    # and one form more is harmless.
    try:
        rgba = ImageColor.getrgb(spec)
    except ValueError:
        raise ColourError(f"{text!r} is not a colour: use {COLOUR_FORMS}") from None
    if len(rgba) == 3:
        rgba = (*rgba, 255)
    return tuple(channel / 255.0 for channel in rgba)  # type: ignore[return-value]


@dataclass(frozen=True)
class Background:
    """An output's background. `colour` is the solid colour (SOLID) or the key colour
    (CHROMA), straight RGBA in 0..1; TRANSPARENT ignores it."""

    mode: str = TRANSPARENT
    colour: tuple[float, float, float, float] = (0.0, 1.0, 0.0, 1.0)

    def __post_init__(self) -> None:
        if self.mode not in BACKGROUND_MODES:
            raise ValueError(f"background mode {self.mode!r} is not one of {', '.join(BACKGROUND_MODES)}")

    @property
    def opaque(self) -> bool:
        """Whether every pixel of the output is opaque (what a backend without alpha needs)."""
        return self.mode != TRANSPARENT and (self.mode == CHROMA or self.colour[3] >= 1.0)
