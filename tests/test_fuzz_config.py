"""Property tests of the files users edit or share: the settings file (app/settings.py)
and avatar manifests (render/rigs/: the sprite rig, the photo rig and the loader that
tells them apart). Any bytes, any JSON, and valid files with a part changed: the settings
load with every good value kept and every bad one said, the file kept aside when it is
unreadable; a manifest loads or gives the loader's RigError in words, never another
exception, and never hangs."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, fields

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from app.settings import Settings, SettingsStore, validate
from pipeline.core.resources import ASSETS_DIR
from render.rigs.loader import load_avatar_rig
from render.rigs.manifest import RigError
from render.rigs.photo_manifest import save_photo_rig
from tests.fuzzing import (
    EDGE_NUMBERS,
    EDGE_STRINGS,
    deep,
    dumps,
    examples,
    json_values,
    mutated,
    mutated_value,
)
from tests.harness.drawn_portrait import drawn_portrait

# Example counts: a settings file loads in ~1 ms; a manifest that stays valid loads its
# images in ~0.12 s (the bundled sprite rig, the 128-pixel drawn portrait), one refused
# in ~1 ms (2-core EPYC VM): about 15 s for the file.
VALID_SETTINGS = asdict(Settings())
# One setting of another kind or out of range, most often: what a hand edit does.
one_setting_changed = st.builds(
    lambda name, value: {**VALID_SETTINGS, name: value}, st.sampled_from(sorted(VALID_SETTINGS)),
    st.one_of(st.sampled_from(EDGE_NUMBERS + EDGE_STRINGS), json_values))
SETTINGS_FILES = st.one_of(
    one_setting_changed.map(lambda v: dumps(v).encode("utf-8", "surrogatepass")),
    json_values.map(lambda v: dumps(v).encode("utf-8", "surrogatepass")),
    mutated(json.dumps(VALID_SETTINGS).encode()),
    mutated_value(VALID_SETTINGS).map(lambda v: dumps(v).encode("utf-8", "surrogatepass")),
    st.binary(max_size=64),
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("settings")


@examples(150)
@given(data=SETTINGS_FILES)
# Found: a number too large for a float in a float setting raised OverflowError; a
# document nested too deep or a number of 5,000 digits escaped the reader's except.
@example(data=b'{"mic_gain_db": 1' + b"0" * 400 + b"}")
@example(data=deep(5000).encode())
@example(data=b"1" * 5000)
def test_any_settings_file_loads_with_its_problems_said(folder, data):
    for old in folder.iterdir():
        old.unlink()
    path = folder / "settings.json"
    path.write_bytes(data)
    store = SettingsStore(path)
    settings = store.load()
    assert isinstance(settings, Settings)
    assert all(isinstance(p, str) and p and "\n" not in p for p in store.problems)
    kept = [p for p in folder.iterdir() if p.name.startswith("settings.json.bad-")]
    if kept:
        # Unreadable: kept whole beside, and said.
        assert kept[0].read_bytes() == data and not path.exists()
        assert any(kept[0].name in p for p in store.problems)
    # What was loaded saves and loads back the same, with nothing to say.
    store.save(settings)
    assert store.load() == settings and store.problems == []


@examples(150)
@given(st.one_of(one_setting_changed, mutated_value(VALID_SETTINGS)))
def test_a_changed_setting_loses_no_other(changed):
    if not isinstance(changed, dict):
        return
    settings, problems = validate(changed)
    for f in fields(Settings):
        if f.name in changed and changed[f.name] == VALID_SETTINGS[f.name]:
            assert getattr(settings, f.name) == VALID_SETTINGS[f.name], f.name
    for name, value in changed.items():
        loaded = getattr(settings, name, None)
        if name not in VALID_SETTINGS or (loaded != value and not isinstance(value, dict)):
            assert any(repr(name) in p or p.startswith(f"{name} ") or
                       (name == "version" and p.startswith("settings version")) for p in problems), name


# -- avatar manifests ----------------------------------------------------------------

SPRITE = json.loads((ASSETS_DIR / "avatars" / "default" / "manifest.json").read_text())


@pytest.fixture(scope="module")
def rigs(tmp_path_factory):
    """(sprite rig folder, photo rig folder): copies whose manifests the tests rewrite."""
    root = tmp_path_factory.mktemp("rigs")
    sprite = root / "sprite"
    shutil.copytree(ASSETS_DIR / "avatars" / "default", sprite)
    photo = save_photo_rig(drawn_portrait(size=128), root / "photo").parent
    return sprite, photo


def _photo_manifest(rigs) -> dict:
    return json.loads((rigs[1] / "manifest.json").read_text())


def _loads_or_says_why(manifest_path) -> None:
    try:
        load_avatar_rig(manifest_path)
    except RigError as refused:
        assert refused.message and "Traceback" not in refused.message


def _write(path, data) -> None:
    path.write_bytes(data if isinstance(data, bytes) else dumps(data).encode("utf-8", "surrogatepass"))


MANIFEST_BYTES = st.one_of(
    json_values.map(lambda v: dumps(v).encode("utf-8", "surrogatepass")),
    mutated(json.dumps(SPRITE).encode()),
    st.just(deep(5000).encode()), st.just(b"1" * 5000), st.binary(max_size=64))


@examples(100)
# Found: RecursionError and the integer-digits ValueError escaped both manifest readers.
@example(which=0, data=deep(5000).encode())
@example(which=1, data=b"1" * 5000)
@given(which=st.sampled_from([0, 1]), data=MANIFEST_BYTES)
def test_any_manifest_bytes_load_or_say_why(rigs, which, data):
    path = rigs[which] / "manifest.json"
    original = path.read_bytes()
    try:
        _write(path, data)
        _loads_or_says_why(path)
    finally:
        path.write_bytes(original)


@examples(60)
@given(changed=mutated_value(SPRITE))
# Found: a NUL in an image's name raised ValueError, a name over 255 bytes OSError.
@example(changed={**SPRITE, "layers": {**SPRITE["layers"], "base": "\x00"}})
@example(changed={**SPRITE, "layers": {**SPRITE["layers"], "base": "a" * 300}})
def test_a_changed_sprite_manifest_loads_or_says_why(rigs, changed):
    path = rigs[0] / "manifest.json"
    original = path.read_bytes()
    try:
        _write(path, changed)
        _loads_or_says_why(path)
    finally:
        path.write_bytes(original)


@examples(60)
@given(data=st.data())
def test_a_changed_photo_manifest_loads_or_says_why(rigs, data):
    path = rigs[1] / "manifest.json"
    original = path.read_bytes()
    changed = data.draw(mutated_value(json.loads(original)))
    try:
        _write(path, changed)
        _loads_or_says_why(path)
    finally:
        path.write_bytes(original)


@pytest.mark.parametrize("image", ["\x00", "a" * 300])
def test_a_photo_picture_that_cannot_be_a_file_name_is_refused(rigs, image):
    # Found by the test above: a NUL in the picture's name raised ValueError, a name
    # over 255 bytes OSError.
    path = rigs[1] / "manifest.json"
    original = path.read_bytes()
    try:
        _write(path, {**json.loads(original), "image": image})
        with pytest.raises(RigError, match='"image"'):
            load_avatar_rig(path)
    finally:
        path.write_bytes(original)


@examples(100)
# Found: /dev/zero was read forever; a name over 255 bytes raised OSError.
@example(path="/dev/zero")
@example(path="a" * 300)
@given(path=st.one_of(st.text(max_size=30), st.sampled_from(
    ["/dev/zero", "/dev/null", "/proc/self/status", "/", ".", "a" * 300, "x/" * 200, "\x00"])))
def test_any_avatar_path_loads_or_says_why(path):
    _loads_or_says_why(path)
