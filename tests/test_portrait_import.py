"""Importing a portrait in the running app, as a user does it: the real window under
Xvfb, the real face landmarker, a real drop event, the saved rig reloaded at restart."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from PIL import Image

from app.settings import Settings, SettingsStore
from render.rigs.photo import PhotoRig
from render.rigs.photo_manifest import load_photo_rig
from tests.harness.app_driver import (
    STILL,
    open_window,
    pump,
    pump_until,
    say,
    wait_until_quiet,
)

pytestmark = [pytest.mark.display, pytest.mark.audio]

# Idle motion off: then only speech may change the picture.
QUIET = Settings(audio_output_device="system", mic_enabled=False, **STILL)


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    from skimage.data import astronaut

    folder = tmp_path_factory.mktemp("pictures")
    face = astronaut()
    Image.fromarray(face).save(folder / "astronaut.png")
    Image.fromarray(np.concatenate([face[20:260, 120:330]] * 3, axis=1)).save(folder / "three.png")
    Image.fromarray(np.full((300, 300, 3), 128, np.uint8)).save(folder / "blank.png")
    (folder / "corrupt.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    (folder / "notes.txt").write_text("hello")
    return folder


@pytest.fixture(scope="module")
def window(qt_app, jack_server, tmp_path_factory):
    config = tmp_path_factory.mktemp("config")
    w = open_window(config, QUIET)
    yield w
    w.close()


def _wait_for_import(window, timeout=15.0):
    pump_until(lambda: not window.importer.busy, timeout, "the portrait import")
    pump(0.05)  # the result signal is queued to the UI thread


def _grab(window) -> np.ndarray:
    image = window.view.grab().convertToFormat(window.view.grab().Format.Format_RGBA8888)
    array = np.frombuffer(image.constBits(), np.uint8).reshape(
        image.height(), image.bytesPerLine() // 4, 4)
    return array[:, :image.width(), :3].astype(np.int16)


def test_a_portrait_becomes_the_talking_avatar_and_is_kept(window, pictures, qt_app):
    window.importer.prepare()  # as the file dialog does while the user picks
    started = time.monotonic()
    window.import_portrait(pictures / "astronaut.png")
    pump_until(lambda: isinstance(window.view.rig, PhotoRig), 15, "the photo avatar")
    took = time.monotonic() - started
    # The landmarks are shown over the new avatar for a moment (1.5 s), then go. Looked at
    # as the avatar appears and waited for, not at fixed times: saving the rig meanwhile
    # took 0.09-0.18 s here (4 runs, load 4.2), on a slower machine more.
    assert window.landmarks.isVisible()
    _wait_for_import(window)
    rig = window.view.rig
    print(f"portrait on screen {took:.2f} s after the request")
    pump_until(lambda: not window.landmarks.isVisible(), 10, "the landmarks to go")

    manifest = window.settings.avatar_manifest
    assert manifest and load_photo_rig(manifest).name == "astronaut"
    assert SettingsStore(window.store.path).load().avatar_manifest == manifest

    rest = _grab(window)
    assert rest.std() > 30, "the portrait is not on screen"
    say(window, "Papa made a map of five big boats.")
    changed = np.zeros(rest.shape[:2], bool)
    for _ in range(10):
        pump(0.12)
        changed |= np.abs(_grab(window) - rest).max(axis=2) > 40
    wait_until_quiet(window)
    window.landmarks.show_for(rig, 1)  # sizes the overlay so it maps canvas → view
    box = window.landmarks.mouth_box()
    x0, y0 = int(box.left()) - 2, int(box.top()) - 2
    x1, y1 = int(box.right()) + 3, int(box.bottom()) + 3
    inside = changed[y0:y1, x0:x1].sum()
    assert inside > 100, f"the mouth hardly moved while speaking ({inside} px)"
    assert changed.sum() == inside, "pixels outside the mouth region changed"


def test_the_imported_avatar_loads_at_the_next_start_without_the_landmarker(
        window, pictures, tmp_path):
    manifest = window.settings.avatar_manifest
    store = SettingsStore(tmp_path / "settings.json")
    store.save(Settings(avatar_manifest=manifest, mic_enabled=False, audio_output_device="system"))
    from app.ui.main_window import MainWindow

    again = MainWindow(store, store.load())
    try:
        # Loaded in the constructor: no import thread, no MediaPipe run.
        assert isinstance(again.view.rig, PhotoRig)
        assert not again.importer.busy and again.importer._landmarker is None
    finally:
        again.close()


def test_importing_the_same_picture_again_reuses_its_rig(window, pictures):
    manifest = window.settings.avatar_manifest  # the first test's astronaut
    avatars = window.importer.avatars_dir
    rigs = sorted(p.parent.name for p in avatars.glob("*/manifest.json"))
    window.import_portrait(pictures / "astronaut.png")
    _wait_for_import(window)
    assert window.importer.reused
    assert window.settings.avatar_manifest == manifest
    assert sorted(p.parent.name for p in avatars.glob("*/manifest.json")) == rigs == ["astronaut"]
    names = [a.name for a in window.importer.library.avatars]
    assert names.count("astronaut") == 1, names


def test_the_library_view_marks_the_avatar_the_studio_shows(window):
    """However the avatar changes (an import, the next-avatar hotkey, the bundled one),
    the window's library view marks the one in use."""
    view = window.library_view
    assert view.in_use == window.settings.avatar_manifest  # the astronaut, imported above
    window.studio.do_action("next_avatar")  # the library wraps round to the bundled one
    pump_until(lambda: window.settings.avatar_manifest is None, 10, "the bundled avatar")
    assert view.in_use is None
    window.studio.do_action("previous_avatar")
    pump_until(lambda: window.settings.avatar_manifest is not None, 10, "the astronaut")
    assert view.in_use == window.settings.avatar_manifest


def test_several_faces_ask_which_one(window, pictures):
    window.import_portrait(pictures / "three.png")
    _wait_for_import(window)
    picker = window.face_picker
    assert picker is not None and picker.isVisible()
    assert [b.text() for b in picker.buttons] == ["Face 1", "Face 2", "Face 3"]
    picker.buttons[2].click()
    _wait_for_import(window)
    rig = window.view.rig
    assert isinstance(rig, PhotoRig) and rig.name == "three"
    width = rig.canvas_size[0] / 3
    mouth_x = rig.landmarks[13, 0]
    assert 2 * width < mouth_x < 3 * width, "the rig was made from another face"


@pytest.mark.parametrize("name, message", [
    ("blank.png", "No face found in blank.png"),
    ("corrupt.jpg", "The picture corrupt.jpg could not be decoded"),
])
def test_a_picture_that_cannot_be_used_is_explained_and_nothing_changes(
        window, pictures, name, message):
    rig, settings = window.view.rig, window.settings
    window.import_portrait(pictures / name)
    _wait_for_import(window)
    assert any(message in notice for notice in window.notices[-2:]), window.notices[-3:]
    assert window.view.rig is rig and window.settings == settings


def _drop(window, path):
    from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
    from PySide6.QtGui import QDropEvent

    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(path))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, data,
                       Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    window.dropEvent(event)
    return event


def test_dropping_a_picture_imports_it_and_other_files_are_explained(window, pictures):
    _drop(window, pictures / "notes.txt")
    assert "notes.txt is not a picture" in window.notices[-1]
    event = _drop(window, pictures / "astronaut.png")
    assert event.isAccepted()
    _wait_for_import(window)
    assert isinstance(window.view.rig, PhotoRig) and window.view.rig.name == "astronaut"
    saved = json.loads(open(window.settings.avatar_manifest, encoding="utf-8").read())
    assert saved["format"] == "lipsync-studio.photo-rig"
