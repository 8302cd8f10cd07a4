"""Where the project's own files live (assets, shaders), for every layer."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
ASSETS_DIR = REPO_ROOT / "assets"
SHADERS_DIR = REPO_ROOT / "shaders"
DEFAULT_AVATAR_MANIFEST = ASSETS_DIR / "avatars" / "default" / "manifest.json"
# The app's icon at each size packaging/make_icons.py makes, and the name the .desktop file
# (packaging/lipsync-studio.desktop) and the icons go by.
APP_ID = "lipsync-studio"
ICONS_DIR = ASSETS_DIR / "icons"
