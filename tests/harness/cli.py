"""The lipsync-studio command line run as a user runs it, in a process of its own, and
what a refusal must look like (one line, no traceback, no file written)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def run_cli(args, timeout=120, config: Path | None = None):
    """The command in a process of its own; its config folder is the session's (conftest)
    or `config`."""
    env = dict(os.environ)
    if config is not None:
        env["LIPSYNC_STUDIO_CONFIG_DIR"] = str(config)
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)


def assert_refused(args, places, message, exit_code=1):
    """Runs the CLI on ``args`` ({tmp} is ``places``); it must say ``message`` (what it
    starts with) on one line of stderr, exit ``exit_code`` and write no file."""
    before = sorted(places.rglob("*"))
    result = run_cli([a.format(tmp=places) for a in args])
    lines = result.stderr.splitlines()
    assert "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1 and lines[0].startswith(f"lipsync-studio: {message.format(tmp=places)}"), \
        result.stderr
    assert result.returncode == exit_code
    assert sorted(places.rglob("*")) == before
