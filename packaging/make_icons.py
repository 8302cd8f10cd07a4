"""Makes the app's icons in assets/icons/ from the bundled avatar "Pixie" at rest:
PNGs at the freedesktop icon theme's usual sizes (the .desktop file's `Icon`), a Windows
.ico and a macOS .icns (packaging/lipsync-studio.spec). The icons are committed; run this
again after changing the avatar:

    python packaging/make_icons.py

The picture is the avatar's drawn area squared from its top (head, headphones and
shoulders), drawn at 1024 px and scaled down for each size.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.avatar_library import sprite_picture  # noqa: E402
from pipeline.core.resources import ASSETS_DIR, DEFAULT_AVATAR_MANIFEST  # noqa: E402

ICONS_DIR = ASSETS_DIR / "icons"
NAME = "lipsync-studio"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)  # 256 is the largest an .ico holds
DRAWN_AT = 1024  # the largest size an .icns holds (512@2x)


def icon_picture() -> Image.Image:
    """The avatar at rest, cropped to a square: as wide as its drawing, from its top."""
    picture = sprite_picture(DEFAULT_AVATAR_MANIFEST, DRAWN_AT)
    left, top, right, _ = picture.getbbox()
    side = right - left
    square = Image.new("RGBA", (side, side), (0, 0, 0, 0))
    square.paste(picture.crop((left, top, right, min(top + side, picture.height))), (0, 0))
    return square.resize((DRAWN_AT, DRAWN_AT), Image.Resampling.LANCZOS)


def main() -> None:
    ICONS_DIR.mkdir(parents=True, exist_ok=True)
    picture = icon_picture()
    scaled = {size: picture.resize((size, size), Image.Resampling.LANCZOS) for size in PNG_SIZES}
    for size, image in scaled.items():
        image.save(ICONS_DIR / f"{NAME}-{size}.png", optimize=True)
    scaled[256].save(ICONS_DIR / f"{NAME}.ico", sizes=[(s, s) for s in ICO_SIZES])
    picture.save(ICONS_DIR / f"{NAME}.icns", append_images=list(scaled.values()))
    print(f"Icons written to {ICONS_DIR.relative_to(ROOT)}/")


if __name__ == "__main__":
    main()
