"""The app's own files are saved whole or not at all (app/config_files.py): a save that
fails keeps the old file, and no temporary file is left behind."""

import os

import pytest

from app.config_files import read_json, write_json


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
