"""pipeline/core/modes.py: every latency mode has its microphone look-ahead and its trades
in words, and what the settings panel needs of the modes (and of everything else it
shows) loads neither the voice's libraries nor onnxruntime."""

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.core.modes import MIC_TRADES, MODE_NAMES, MODES_MS, VOICE_TRADES

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("onnx", "onnxruntime", "piper")


def test_every_mode_has_a_look_ahead_and_its_trades_in_one_line_each():
    assert tuple(MODES_MS) == tuple(VOICE_TRADES) == tuple(MIC_TRADES) == MODE_NAMES
    for text in (*VOICE_TRADES.values(), *MIC_TRADES.values()):
        assert text and "\n" not in text


def _loaded_after_importing(module: str) -> list[str]:
    code = (f"import sys, {module}\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


# The voice's module loads all three: the check sees them where they are loaded.
@pytest.mark.parametrize("module, loaded", [
    ("app.ui.settings_panel", []),
    ("pipeline.voice.streaming_tts", list(HEAVY)),
])
def test_the_settings_panel_loads_no_voice_and_no_model(module, loaded):
    assert _loaded_after_importing(module) == loaded
