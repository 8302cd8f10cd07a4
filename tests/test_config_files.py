"""The app's own files are saved whole or not at all (app/config_files.py): a save that
fails keeps the old file, and no temporary file is left behind."""

import json
import os

import pytest

from app.config_files import read_json, write_json
from tests.harness.services import run_in_child


def test_a_save_replaces_the_file_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "data.json"
    write_json(path, {"a": 1})
    write_json(path, {"a": 2})
    assert read_json(path) == {"a": 2}
    assert sorted(os.listdir(path.parent)) == ["data.json"]


def test_a_failed_save_keeps_the_old_file(tmp_path):
    path = tmp_path / "data.json"
    write_json(path, {"kept": True})
    with pytest.raises(TypeError):
        write_json(path, {"not json": object()})
    assert read_json(path) == {"kept": True}
    assert sorted(os.listdir(tmp_path)) == ["data.json"]


def test_a_full_disk_keeps_the_old_file(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    path = tmp_path / "data.json"
    write_json(path, {"kept": True})
    # The temporary file's writes fail as on a full disk: /dev/full answers ENOSPC.
    import app.config_files as config_files

    real_open = open

    def full_open(file, mode="r", **kwargs):
        if "w" in mode and ".tmp-" in str(file):
            return real_open("/dev/full", mode, **kwargs)
        return real_open(file, mode, **kwargs)

    config_files.open = full_open
    try:
        with pytest.raises(OSError):
            write_json(path, {"new": True})
    finally:
        del config_files.open
    assert read_json(path) == {"kept": True}


def test_unreadable_files_read_as_none(tmp_path):
    assert read_json(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text("{")
    assert read_json(tmp_path / "bad.json") is None


KILLS = 40


def test_a_save_killed_at_any_moment_leaves_the_old_file_or_the_new_one():
    # In a process of its own, which forks savers and kills them (the test process has
    # threads: forking it would copy their locks as they happen to be).
    _, result = run_in_child("tests.test_config_files:kill_savers", timeout=60)
    for seen in result["seen"]:
        assert seen["settings_problems"] == [] and seen["mode"] in ("ultra", "premium"), seen
        assert seen["tokens_problem"] is None and seen["tokens"] in ([], ["bot"]), seen
    # The kills fell at different points of the saves: each file was found both ways.
    assert {seen["mode"] for seen in result["seen"]} == {"ultra", "premium"}
    assert len({tuple(seen["tokens"]) for seen in result["seen"]}) == 2


def kill_savers() -> None:
    """Prints JSON: what the settings and token files held after each of KILLS processes
    saving them over and over, through the app's own stores, was killed (SIGKILL) at a
    random moment of its first few saves."""
    import random
    import signal
    import tempfile
    import time
    from pathlib import Path

    from app.api.tokens import TokenStore
    from app.settings import SettingsStore

    folder = Path(tempfile.mkdtemp())
    settings = SettingsStore(folder / "settings.json")
    tokens = TokenStore(folder / "api_tokens.json")
    started = time.perf_counter()
    for mode in ("premium", "ultra"):  # an old file of each to keep or replace, timed
        _save_both(settings, tokens, mode)
    pair = (time.perf_counter() - started) / 2  # a settings save and a token save
    rng = random.Random(26)
    seen = []
    for _ in range(KILLS):
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the saver: as the app at each change, until killed
            try:
                os.close(done_r)
                tokens.reload()
                while True:
                    for mode in ("premium", "ultra"):
                        _save_both(settings, tokens, mode)
                        os.write(done_w, b".")
            finally:
                os._exit(0)
        os.close(done_w)
        # After 0-3 pairs of saves, somewhere in the next: before, within or between them.
        for _ in range(rng.randrange(4)):
            os.read(done_r, 1)
        time.sleep(rng.uniform(0.0, pair))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(done_r)
        loaded = SettingsStore(folder / "settings.json")
        mode = loaded.load().latency_mode
        kept = TokenStore(folder / "api_tokens.json")
        seen.append({"settings_problems": loaded.problems, "mode": mode,
                     "tokens_problem": kept.problem, "tokens": [e.name for e in kept.names()]})
    print(json.dumps({"seen": seen, "pair_ms": pair * 1e3}))


def _save_both(settings, tokens, mode: str) -> None:
    """A settings change and a token change, as the app saves them."""
    from app.settings import Settings

    settings.save(Settings(latency_mode=mode))
    if tokens.names():
        tokens.revoke("bot")
    else:
        tokens.create("bot")
