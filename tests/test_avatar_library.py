"""The avatar library with real files: a real portrait (skimage's astronaut) through the
real face landmarker, the bundled sprite rig, the library file read by a new process,
and the `avatars` commands run as a user runs them, in a process of their own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.avatar_library import (
    BUNDLED_NAME,
    LIBRARY_FILE,
    THUMBNAIL_PX,
    AvatarLibrary,
    FacesToChoose,
    LibraryError,
    read_avatar,
    voice_of,
)
from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
from pipeline.face.landmarks import FaceLandmarker
from pipeline.voice.voice_files import BUNDLED_VOICE
from render.rigs.manifest import RigError
from render.rigs.photo import build_photo_rig
from render.rigs.photo_manifest import save_photo_rig

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    from skimage.data import astronaut

    folder = tmp_path_factory.mktemp("pictures")
    face = astronaut()
    Image.fromarray(face).save(folder / "astronaut.png")
    # The same face, other pixels: another picture to the library.
    (folder / "mirrored").mkdir()
    Image.fromarray(face[:, ::-1]).save(folder / "mirrored" / "astronaut.png")
    Image.fromarray(np.concatenate([face[20:260, 120:330]] * 3, axis=1)).save(folder / "three.png")
    return folder


class Landmarker:
    """The real face landmarker, counting how often the library asks for it: a reused
    rig must not need it."""

    def __init__(self) -> None:
        self.model = FaceLandmarker()
        self.asked = 0

    def __call__(self) -> FaceLandmarker:
        self.asked += 1
        return self.model


@pytest.fixture(scope="module")
def landmarker():
    model = Landmarker()
    yield model
    model.model.close()


@pytest.fixture
def folder(tmp_path) -> Path:
    return tmp_path / "avatars"


def _sprite_rig(where: Path) -> Path:
    """A sprite rig of the user's own: a copy of the bundled one under another name."""
    shutil.copytree(DEFAULT_AVATAR_MANIFEST.parent, where)
    manifest = where / "manifest.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["name"] = where.name
    manifest.write_text(json.dumps(data), encoding="utf-8")
    return manifest


def test_the_bundled_avatar_is_first_and_in_use_without_a_setting(folder):
    library = AvatarLibrary(folder)
    assert [a.name for a in library.avatars] == [BUNDLED_NAME]
    assert library.in_use(None).bundled and library.in_use(None).setting is None
    assert (folder / LIBRARY_FILE).is_file() and library.problems == []
    with pytest.raises(LibraryError, match="keeps its name"):
        library.rename(library.avatars[0], "Pixie")
    with pytest.raises(LibraryError, match="cannot be removed"):
        library.remove(library.avatars[0])


def test_importing_the_same_picture_again_reuses_its_rig(folder, pictures, landmarker):
    library = AvatarLibrary(folder)
    asked = landmarker.asked
    first = library.import_picture(pictures / "astronaut.png", None, landmarker)
    assert not first.reused and landmarker.asked == asked + 1
    started = time.perf_counter()
    shown = []
    again = library.import_picture(pictures / "astronaut.png", None, landmarker,
                                   on_rig=lambda rig, reused: shown.append(reused))
    took = time.perf_counter() - started
    assert again.reused and shown == [True]
    assert again.avatar == first.avatar and landmarker.asked == asked + 1
    assert np.array_equal(again.rig.landmarks, first.rig.landmarks)
    # The same face chosen by number is the same rig.
    assert library.import_picture(pictures / "astronaut.png", 0, landmarker).reused
    rigs = sorted(p.parent.name for p in folder.glob("*/manifest.json"))
    assert rigs == ["astronaut"], "a second rig was made from the same picture"
    print(f"re-import {took * 1000:.0f} ms")

    # Another picture of the same name is another avatar, named apart.
    other = library.import_picture(pictures / "mirrored" / "astronaut.png", None, landmarker)
    assert not other.reused and other.avatar.name == "astronaut 2"
    assert other.avatar.manifest.parent.name == "astronaut-2"


def test_a_picture_with_several_faces_keeps_one_rig_per_face(folder, pictures, landmarker):
    library = AvatarLibrary(folder)
    with pytest.raises(FacesToChoose) as choose:
        library.import_picture(pictures / "three.png", None, landmarker)
    assert len(choose.value.boxes) == 3 and choose.value.image.shape[:2] == (240, 630)
    right = library.import_picture(pictures / "three.png", 2, landmarker)
    asked = landmarker.asked
    assert library.import_picture(pictures / "three.png", 2, landmarker).avatar == right.avatar
    assert landmarker.asked == asked
    left = library.import_picture(pictures / "three.png", 0, landmarker)
    assert not left.reused and left.avatar.manifest != right.avatar.manifest
    # Faces are numbered left to right: each rig moves its own face's mouth.
    assert left.rig.landmarks[13, 0] < 210 < 420 < right.rig.landmarks[13, 0]
    # Without a number the picture's faces are still to be chosen, not guessed.
    with pytest.raises(FacesToChoose):
        library.import_picture(pictures / "three.png", None, landmarker)


def test_rename_and_remove(folder, pictures, landmarker, tmp_path):
    library = AvatarLibrary(folder)
    photo = library.import_picture(pictures / "astronaut.png", None, landmarker).avatar
    sprite = library.adopt(_sprite_rig(tmp_path / "Cat"))
    assert [a.name for a in library.avatars] == [BUNDLED_NAME, "astronaut", "Cat"]
    with pytest.raises(LibraryError, match="already called 'CAT'"):
        library.rename(photo, "CAT")
    with pytest.raises(LibraryError, match="1 to 64 characters"):
        library.rename(photo, "   ")
    photo = library.rename(photo, "  Commander  ")
    assert library.named("commander") == photo and photo.name == "Commander"
    assert library.adopt(sprite.manifest.parent) == sprite, "adopting twice adds twice"

    thumbnails = folder / ".thumbnails"
    library.thumbnail(photo)
    gone = library.remove(photo)
    assert gone.files_deleted and not photo.manifest.parent.exists()
    assert "Deleted Commander and its folder" in gone.message
    assert list(thumbnails.glob("*.png")) == []
    kept = library.remove(sprite)
    assert not kept.files_deleted and sprite.manifest.is_file()
    assert f"its files in {sprite.manifest.parent} are left as they were" in kept.message
    assert [a.name for a in library.avatars] == [BUNDLED_NAME]
    with pytest.raises(LibraryError, match="No avatar is called 'Commander'; the library has "
                       f"'{BUNDLED_NAME}'"):
        library.named("Commander")


def test_a_missing_folder_is_listed_and_told_not_dropped(folder, pictures, landmarker):
    library = AvatarLibrary(folder)
    made = library.import_picture(pictures / "astronaut.png", None, landmarker).avatar
    library.set_voice(made, "en_GB-alba-medium", 0)
    shutil.rmtree(made.manifest.parent)
    again = AvatarLibrary(folder)
    listed = again.named("astronaut")
    assert listed.missing and listed.voice == "en_GB-alba-medium"
    assert str(made.manifest.parent) in listed.missing_message
    with pytest.raises(RigError, match="astronaut is missing: its folder .* is gone"):
        again.thumbnail(listed)
    assert again.step(None, 1).bundled, "next avatar went to a missing one"
    # Importing its picture again makes it anew in its entry: name and voice kept.
    asked = landmarker.asked
    back = again.import_picture(pictures / "astronaut.png", None, landmarker)
    assert not back.reused and landmarker.asked == asked + 1
    assert back.avatar.name == "astronaut" and back.avatar.voice == "en_GB-alba-medium"
    assert not back.avatar.missing and len(again.avatars) == 2
    # A character keeps its voice; one of no voice of its own speaks the settings' voice.
    assert voice_of(back.avatar, None, 0) == ("en_GB-alba-medium", 0)
    assert voice_of(again.avatars[0], "de_DE-thorsten-medium", 2) == ("de_DE-thorsten-medium", 2)
    assert voice_of(None, None, 0) == (None, 0)


def test_next_and_previous_follow_library_order(folder, tmp_path):
    library = AvatarLibrary(folder)
    a, b, c = (library.adopt(_sprite_rig(tmp_path / name)) for name in ("A", "B", "C"))
    bundled = library.avatars[0]
    shutil.rmtree(b.manifest.parent)
    assert library.step(None, 1) == a
    assert library.step(a.setting, 1) == c, "a missing avatar was not passed over"
    assert library.step(c.setting, 1) == bundled, "next did not wrap around"
    assert library.step(None, -1) == c and library.step(c.setting, -1) == a
    # From an avatar outside the library (a picture opened directly), next is the first.
    assert library.step(str(tmp_path / "elsewhere.png"), 1) == bundled


def test_rigs_in_the_folder_at_first_run_are_adopted_once(folder, pictures, landmarker):
    from pipeline.face.landmarks import find_face, load_portrait

    image = load_portrait(pictures / "astronaut.png")
    face = find_face(landmarker().detect(image), "astronaut.png")
    save_photo_rig(build_photo_rig(image, face.points, "Eileen"), folder / "eileen")
    _sprite_rig(folder / "Kitty")
    (folder / "notes").mkdir()
    (folder / "notes" / "manifest.json").write_text('{"not": "a rig"}', encoding="utf-8")
    library = AvatarLibrary(folder)
    assert {(a.name, a.kind) for a in library.avatars[1:]} == {("Eileen", "photo"), ("Kitty", "sprite")}
    assert library.avatars[0].bundled
    library.remove(library.named("Kitty"))
    assert [a.name for a in AvatarLibrary(folder).avatars] == [BUNDLED_NAME, "Eileen"], \
        "a removed rig came back at the next start"


def test_a_broken_library_file_is_kept_aside_and_said(folder):
    folder.mkdir()
    _sprite_rig(folder / "Kitty")
    (folder / LIBRARY_FILE).write_text("{ half a file", encoding="utf-8")
    library = AvatarLibrary(folder)
    assert len(library.problems) == 1 and "could not be read; it is kept as" in library.problems[0]
    assert [a.name for a in library.avatars] == [BUNDLED_NAME, "Kitty"]
    assert len(list(folder.glob(f"{LIBRARY_FILE}.bad-*"))) == 1
    data = json.loads((folder / LIBRARY_FILE).read_text(encoding="utf-8"))
    data["avatars"].append({"name": "ghost"})
    (folder / LIBRARY_FILE).write_text(json.dumps(data), encoding="utf-8")
    assert [a.name for a in library.avatars] == [BUNDLED_NAME, "Kitty"]
    assert library.problems == [f"Entry 3 of the avatar library {folder / LIBRARY_FILE} is not "
                                "an avatar; it is left out."]


def test_thumbnails_show_the_avatar_and_are_made_once(folder, pictures, landmarker):
    library = AvatarLibrary(folder)
    photo = library.import_picture(pictures / "astronaut.png", None, landmarker)
    bundled = library.avatars[0]
    for avatar in (bundled, photo.avatar):
        path = library.thumbnail(avatar)
        picture = np.asarray(Image.open(path).convert("RGBA"))
        assert picture.shape == (THUMBNAIL_PX, THUMBNAIL_PX, 4)
        # Drawn, not blank: the bundled rig covers 48 % of its square and the face crop all
        # of it, their colours' spread 90 and 76 (measured); an empty picture has 0 and 0.
        assert (picture[..., 3] > 0).mean() > 0.4 and picture[..., :3].std() > 30
        made = path.stat().st_mtime_ns
        assert library.thumbnail(avatar) == path and path.stat().st_mtime_ns == made
    # The photo thumbnail is the face, in its middle: the landmarker finds it there
    # (measured: box x 31-97, y 25-102 of 128, centred within 1 px, 0.52 of the width,
    # as FACE_PAD's 0.35 a side makes the landmarks' box 1/1.7 = 0.59 of it).
    picture = np.asarray(Image.open(library.thumbnail(photo.avatar)).convert("RGBA"))
    (face,) = landmarker().detect(picture)
    x0, y0, x1, y1 = face.box
    assert abs((x0 + x1) / 2 - 64) < 8 and abs((y0 + y1) / 2 - 64) < 8, face.box
    assert 0.4 < (x1 - x0) / THUMBNAIL_PX < 0.7, face.box
    # A rig changed on disk gets a new thumbnail; the old one goes.
    old = library.thumbnail(photo.avatar)
    os.utime(photo.avatar.manifest, ns=(time.time_ns(), time.time_ns() + 10**9))
    new = library.thumbnail(photo.avatar)
    assert new != old and new.exists() and not old.exists()


# -- a new process, and the commands --------------------------------------------------

# The command group as app/cli.py registers it (add_parser on its sub-commands, run).
def _avatars(config: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LIPSYNC_STUDIO_CONFIG_DIR": str(config)}
    return subprocess.run([sys.executable, "-m", "app", "avatars", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def _errors(result: subprocess.CompletedProcess) -> list[str]:
    """The command's own lines on stderr (MediaPipe's native logging prints there too)."""
    return [line for line in result.stderr.splitlines()
            if line.startswith(("lipsync-studio:", "  face ", "Choose one"))]


def test_the_commands_and_a_new_process_see_one_library(tmp_path, pictures):
    config = tmp_path / "config"
    made = _avatars(config, "import", str(pictures / "astronaut.png"), "--name", "Eileen")
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines() == [
        f"Added Eileen ({config / 'avatars' / 'astronaut'}).",
        "Make it the avatar with: lipsync-studio avatars use Eileen"]
    again = _avatars(config, "import", str(pictures / "astronaut.png"))
    assert again.returncode == 0 and "was imported before: it is the avatar Eileen" in again.stdout

    several = _avatars(config, "import", str(pictures / "three.png"))
    assert several.returncode == 1 and several.stdout == ""
    errors = _errors(several)
    assert errors[0] == ("lipsync-studio: three.png shows 3 faces; pick the one to animate "
                         "(numbered from 0, left to right):")
    assert [line.split(":")[0] for line in errors[1:4]] == ["  face 0", "  face 1", "  face 2"]
    assert errors[4] == "Choose one with --face N."
    assert "Traceback" not in several.stderr
    chosen = _avatars(config, "import", str(pictures / "three.png"), "--face", "1")
    assert chosen.returncode == 0 and "Added three" in chosen.stdout
    nowhere = _avatars(config, "import", str(pictures / "three.png"), "--face", "7")
    assert nowhere.returncode == 1 and _errors(nowhere) == [
        "lipsync-studio: Face number 7 does not exist: three.png shows 3 faces (numbered "
        "from 0, left to right)."]

    renamed = _avatars(config, "rename", "THREE", "Middle")
    assert renamed.returncode == 0 and renamed.stdout == "three is called Middle now.\n"
    used = _avatars(config, "use", "eileen")
    assert used.returncode == 0 and used.stdout == "Eileen is the avatar now.\n"
    listed = _avatars(config, "list").stdout.splitlines()
    rows = [line.split("\t") for line in listed]
    assert [(r[0], r[1]) for r in rows] == [(BUNDLED_NAME, "sprite"), ("Eileen", "photo"),
                                           ("Middle", "photo")]
    assert rows[1][2] == str(config / "avatars" / "astronaut" / "manifest.json")
    assert [r[3:] for r in rows] == [["the settings' voice"], ["the settings' voice", "in use"],
                                     ["the settings' voice"]]

    # This process is a new one: it reads what the commands wrote, voice included.
    library = AvatarLibrary(config / "avatars")
    eileen = library.named("Eileen")
    library.set_voice(eileen, "de_DE-thorsten-medium", 0)
    settings = json.loads((config / "settings.json").read_text(encoding="utf-8"))
    assert settings["avatar_manifest"] == str(eileen.manifest)
    assert "de_DE-thorsten-medium" in _avatars(config, "list").stdout

    voiced = _avatars(config, "voice", "Middle", BUNDLED_VOICE.name)
    assert voiced.returncode == 0 and voiced.stdout == f"Middle speaks with {BUNDLED_VOICE.name} now.\n"
    assert AvatarLibrary(config / "avatars").named("Middle").voice == BUNDLED_VOICE.name
    unknown_voice = _avatars(config, "voice", "Middle", "nosuch")
    assert unknown_voice.returncode == 1
    assert _errors(unknown_voice)[0].startswith("lipsync-studio: No voice named 'nosuch'. Installed: ")
    no_speaker = _avatars(config, "voice", "Middle", BUNDLED_VOICE.name, "--speaker", "3")
    assert _errors(no_speaker) == [f"lipsync-studio: {BUNDLED_VOICE.name} has 1 speaker: "
                                   "--speaker takes 0 to 0."]

    shutil.rmtree(library.named("Middle").manifest.parent)
    missing = [line for line in _avatars(config, "list").stdout.splitlines() if "Middle" in line]
    assert len(missing) == 1 and "MISSING: Middle is missing: its folder" in missing[0]
    refused = _avatars(config, "use", "Middle")
    assert refused.returncode == 1 and "Middle is missing" in _errors(refused)[0]

    removed = _avatars(config, "remove", "Eileen")
    assert removed.returncode == 0 and removed.stdout.splitlines() == [
        f"Deleted Eileen and its folder {config / 'avatars' / 'astronaut'}.",
        "Eileen was the avatar: the bundled avatar is the avatar now."]
    settings = json.loads((config / "settings.json").read_text(encoding="utf-8"))
    assert settings["avatar_manifest"] is None
    unknown = _avatars(config, "rename", "Eileen", "X")
    assert unknown.returncode == 1 and _errors(unknown) == [
        f"lipsync-studio: No avatar is called 'Eileen'; the library has '{BUNDLED_NAME}', 'Middle'."]


# -- the library view, under Xvfb -----------------------------------------------------


def _icon_pixels(item) -> np.ndarray:
    from PySide6.QtGui import QImage

    image = item.icon().pixmap(THUMBNAIL_PX, THUMBNAIL_PX).toImage().convertToFormat(
        QImage.Format.Format_RGBA8888)
    return np.frombuffer(image.constBits(), np.uint8).reshape(
        image.height(), image.bytesPerLine() // 4, 4)[:, :image.width()]


def _settle(qt_app, view, timeout: float = 10.0) -> None:
    """Until the view's thumbnails are made (a 4000² photo rig's took 1.5 s here)."""
    deadline = time.monotonic() + timeout
    while view.making and time.monotonic() < deadline:
        qt_app.processEvents()
        time.sleep(0.005)
    assert not view.making, f"thumbnails still being made after {timeout} s"


def _editor(view):
    """The line editor the list opened on its item (no window manager gives focus here)."""
    from PySide6.QtWidgets import QLineEdit

    (editor,) = [e for e in view.list.findChildren(QLineEdit) if e.isVisible()]
    return editor


@pytest.mark.display
def test_the_view_shows_marks_and_switches(qt_app, folder, pictures, landmarker, tmp_path):
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from app.ui.library_view import FRAME_COLOUR, LibraryView

    library = AvatarLibrary(folder)
    photo = library.import_picture(pictures / "astronaut.png", None, landmarker).avatar
    cat = library.adopt(_sprite_rig(tmp_path / "Cat"))
    gone = library.adopt(_sprite_rig(tmp_path / "Gone"))
    shutil.rmtree(gone.manifest.parent)
    view = LibraryView(library, photo.setting)
    # The import left the photo's thumbnail made; the sprite rigs' are made off the GUI
    # thread (15 ms each here), shown as "…" until then. Asked before any event is
    # processed: a thumbnail leaves `making` in a slot on this thread, and the window's
    # exposure can take longer than both (it did, in one fresh-clone run).
    assert view.making == {library.avatars[0].manifest, cat.manifest}
    chosen, told = [], []
    view.chosen.connect(chosen.append)
    view.told.connect(lambda text, severity: told.append(text))
    view.resize(640, 420)
    view.show()
    QTest.qWaitForWindowExposed(view)
    _settle(qt_app, view)

    items = [view.list.item(row) for row in range(view.list.count())]
    assert [item.text() for item in items] == [BUNDLED_NAME, "astronaut", "Cat", "Gone"]
    assert [item.font().bold() for item in items] == [False, True, False, False]
    # The one in use is framed: its icon's corner is the frame's colour, the others' not.
    frame = (FRAME_COLOUR.red(), FRAME_COLOUR.green(), FRAME_COLOUR.blue())
    corners = [tuple(_icon_pixels(item)[1, 1, :3]) for item in items]
    assert corners[1] == frame and frame not in corners[:1] + corners[2:]
    assert "Gone is missing: its folder" in items[3].toolTip()
    assert items[3].foreground().color().getRgb()[:3] == (150, 150, 150)
    assert view.list.currentItem() is items[1]
    assert not view.delete_button.isEnabled() or view.selected == photo

    # Use: double-click, or choose and press the button; a missing one is told, not used.
    rect = view.list.visualItemRect(items[2])
    # A double-click is a click and then a second press (Qt 6's mouseDClick sends only
    # the second), as the X server delivers them.
    QTest.mouseClick(view.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    QTest.mouseDClick(view.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert chosen == [cat]
    view.list.setCurrentItem(items[3])
    assert not view.use_button.isEnabled()
    view.use(gone)
    assert chosen == [cat] and told[-1] == gone.missing_message
    QTest.mouseClick(view.bundled_button, Qt.MouseButton.LeftButton)
    assert chosen[-1].bundled
    view.list.setCurrentItem(items[0])
    assert not view.rename_button.isEnabled() and not view.delete_button.isEnabled()

    # Rename in place: F2's editor, typed keys, Enter.
    view.start_rename(cat)
    editor = _editor(view)
    QTest.keyClick(editor, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(editor, "Kitty")
    QTest.keyClick(editor, Qt.Key.Key_Return)
    qt_app.processEvents()
    assert [a.name for a in library.avatars] == [BUNDLED_NAME, "astronaut", "Kitty", "Gone"]
    assert view.list.item(2).text() == "Kitty"
    view.start_rename(library.named("Kitty"))
    editor = _editor(view)
    QTest.keyClick(editor, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(editor, "ASTRONAUT")
    QTest.keyClick(editor, Qt.Key.Key_Return)
    qt_app.processEvents()
    assert told[-1] == "Kitty keeps its name: Another avatar is already called 'ASTRONAUT'."
    assert view.list.item(2).text() == "Kitty"

    # A voice of its own, from the context menu's Voice list of the installed voices.
    voiced = []
    view.voice_changed.connect(voiced.append)
    view.list.customContextMenuRequested.emit(view.list.visualItemRect(view.list.item(2)).center())
    (voices,) = [a.menu() for a in view.menu.actions() if a.text() == "Voice"]
    assert [a.text() for a in voices.actions() if a.isChecked()] == ["The settings' voice"]
    (bundled_voice,) = [a for a in voices.actions() if a.text() == BUNDLED_VOICE.name]
    bundled_voice.trigger()
    assert library.named("Kitty").voice == BUNDLED_VOICE.name
    assert voiced == [library.named("Kitty")] and told[-1] == f"Kitty speaks with {BUNDLED_VOICE.name} now."
    view.menu.close()

    # Deleting the avatar in use asks, then falls back to the bundled one, saying so.
    view.list.setCurrentItem(view.item_of(photo))
    QTest.mouseClick(view.delete_button, Qt.MouseButton.LeftButton)
    assert view.confirm.isVisible() and "its folder is deleted too" in view.confirm.text()
    view.confirm.button(view.confirm.StandardButton.No).click()
    assert photo.manifest.is_file() and library.in_use(photo.setting) == photo
    QTest.mouseClick(view.delete_button, Qt.MouseButton.LeftButton)
    view.confirm.button(view.confirm.StandardButton.Yes).click()
    assert not photo.manifest.parent.exists() and chosen[-1].bundled
    assert told[-1] == (f"Deleted astronaut and its folder {photo.manifest.parent}. It was the "
                        "avatar: the bundled avatar is shown now.")
    view.set_in_use(None)
    assert [view.list.item(r).text() for r in range(view.list.count())] == [
        BUNDLED_NAME, "Kitty", "Gone"]
    assert view.list.item(0).font().bold()

    # A rig that cannot be drawn is told once, and its tooltip says why.
    broken = _sprite_rig(tmp_path / "Broken")
    (broken.parent / "base.svg").unlink()
    library.adopt(broken)
    view.refresh()
    _settle(qt_app, view)
    view.refresh()
    _settle(qt_app, view)
    why = [text for text in told if text.startswith("Broken cannot be shown: ")]
    assert len(why) == 1 and "base.svg" in why[0], told[-3:]
    assert view.item_of(library.named("Broken")).toolTip() == why[0]
    view.close()


def test_a_photo_avatar_read_comes_with_its_picture_premultiplied_for_the_gui_thread(tmp_path):
    # The first output showing a photo rig read afresh premultiplied its picture on the GUI
    # thread: 30-37 ms for a 1024 px one (2-vCPU VM).
    from render.gl import sprite_renderer
    from tests.harness.drawn_portrait import drawn_portrait

    manifest = save_photo_rig(drawn_portrait(size=128), tmp_path / "photo")
    rig = read_avatar(str(manifest))
    done = sprite_renderer._PREMULTIPLIED.get(id(rig.image))
    assert done is not None and done[0]() is rig.image


def test_an_avatar_read_comes_with_its_images_premultiplied_for_the_gui_thread():
    # Read on a worker at a switch (read_avatar): premultiplying the bundled avatar's 25
    # images there, not on the GUI thread, took a switch to it from 105 to 27 ms of the
    # GUI thread (2-vCPU VM, the view and the avatar window).
    from render.gl import sprite_renderer

    rig = read_avatar(None)
    images = sprite_renderer.rig_images(rig).values()
    assert len(images) >= 20
    for image in images:
        done = sprite_renderer._PREMULTIPLIED.get(id(image))
        assert done is not None and done[0]() is image
