"""What every command of `lipsync-studio` shares: a refusal in one line, and the saved
settings with what was dropped of them said."""

from __future__ import annotations

import sys

from app.settings import Settings, SettingsStore


def fail(message: str) -> int:
    """Say `message` on stderr as the command's one line; the exit status for it."""
    print(f"lipsync-studio: {message}", file=sys.stderr)
    return 1


def saved_settings(store: SettingsStore | None = None) -> Settings:
    """The user's saved settings; their problems said on stderr (the defaults stand in, and
    saving them again keeps only the values that are good)."""
    store = store or SettingsStore()
    settings = store.load()
    for problem in store.problems:
        print(f"note: in {store.path}: {problem}", file=sys.stderr)
    return settings
