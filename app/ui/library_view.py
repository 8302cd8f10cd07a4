"""The avatar library on screen (app/avatar_library.py): a grid of thumbnails, the
bundled avatar first and the one in use framed and in bold, with Use, Rename, Delete and
"Bundled avatar" as buttons and in each thumbnail's context menu.

The view changes the library itself (names, voices, removals) but never the avatar
shown: it emits `chosen` with the Avatar to switch to, and the window loads it (its rig,
its voice), and `voice_changed` when an avatar's voice is chosen (the window reloads the
voice where that avatar is in use). What it has to say goes out through `told`, for the
window's messages.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QIcon, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (
    QHBoxLayout,
    QListView,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.avatar_library import (
    SETTINGS_VOICE,
    THUMBNAIL_PX,
    Avatar,
    AvatarLibrary,
    LibraryError,
)
from app.messages import Severity
from app.voices import catalogue
from pipeline.face.landmarks import PortraitError
from render.rigs.manifest import RigError

# The frame around the avatar in use: wide enough to see at a glance in a grid of
# thumbnails, inside the icon so the grid does not shift when the choice moves.
FRAME_PX = 4
FRAME_COLOUR = QColor(255, 190, 40)
AVATAR = Qt.ItemDataRole.UserRole


class LibraryView(QWidget):
    """The library's avatars. `set_in_use` takes the settings' avatar_manifest (None: the
    bundled one) and marks its entry; `refresh` re-reads the library (after an import)."""

    chosen = Signal(object)  # the Avatar to show now (its setting and its voice)
    voice_changed = Signal(object)  # the Avatar, with its new voice and speaker
    told = Signal(str, object)  # a message for the user, its Severity
    _thumbnail_made = Signal(object, object)  # from the worker: the Avatar, why not or None

    def __init__(self, library: AvatarLibrary, in_use: str | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.library = library
        self.in_use = in_use
        self.confirm: QMessageBox | None = None
        self.menu: QMenu | None = None
        self._icons: dict[str, QIcon] = {}
        self.list = QListWidget()
        self.list.setViewMode(QListView.ViewMode.IconMode)
        self.list.setResizeMode(QListView.ResizeMode.Adjust)
        self.list.setMovement(QListView.Movement.Static)
        self.list.setIconSize(QSize(THUMBNAIL_PX, THUMBNAIL_PX))
        self.list.setWordWrap(True)
        self.list.setEditTriggers(QListWidget.EditTrigger.EditKeyPressed)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._context_menu)
        self.list.itemActivated.connect(lambda item: self.use(item.data(AVATAR)))
        self.list.itemChanged.connect(self._renamed)
        self.list.currentItemChanged.connect(self._enable)

        self.use_button = QPushButton("Use")
        self.use_button.setToolTip("Make the chosen avatar the avatar (or double-click it)")
        self.use_button.clicked.connect(lambda: self.use(self.selected))
        self.rename_button = QPushButton("Rename")
        self.rename_button.setToolTip("Give the chosen avatar another name (or press F2)")
        self.rename_button.clicked.connect(lambda: self.start_rename(self.selected))
        self.delete_button = QPushButton("Delete")
        self.delete_button.setToolTip("Take the chosen avatar out of the library")
        self.delete_button.clicked.connect(lambda: self.ask_to_remove(self.selected))
        self.bundled_button = QPushButton("Bundled avatar")
        self.bundled_button.setToolTip("Go back to the avatar that comes with Lipsync Studio")
        self.bundled_button.clicked.connect(lambda: self.use(self.library.avatars[0]))
        buttons = QHBoxLayout()
        for button in (self.use_button, self.rename_button, self.delete_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.bundled_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.list, 1)
        layout.addLayout(buttons)
        # Manifest → its version (mtime) and why that version cannot be shown: told once,
        # tried again when the rig changes.
        self._broken: dict[Path, tuple[int | None, str]] = {}
        # Thumbnails not made yet are made here, one at a time: loading a large photo rig
        # takes seconds, which the GUI thread must not wait for.
        self.making: set[Path] = set()
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="avatar-thumbnails")
        self._thumbnail_made.connect(self._on_thumbnail_made)
        self.refresh()

    @property
    def selected(self) -> Avatar | None:
        item = self.list.currentItem()
        return item.data(AVATAR) if item is not None else None

    def item_of(self, avatar: Avatar) -> QListWidgetItem | None:
        for row in range(self.list.count()):
            if self.list.item(row).data(AVATAR).manifest == avatar.manifest:
                return self.list.item(row)
        return None

    # -- what is shown --------------------------------------------------------------

    def set_in_use(self, setting: str | None) -> None:
        self.in_use = setting
        self.refresh()

    def refresh(self) -> None:
        chosen = self.selected
        current = self.library.in_use(self.in_use)
        self.list.blockSignals(True)
        self.list.clear()
        for avatar in self.library.avatars:
            item = QListWidgetItem(self._icon(avatar, avatar == current), avatar.name)
            item.setData(AVATAR, avatar)
            if not avatar.bundled:
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
            item.setToolTip(f"{avatar.name}, speaking with {avatar.voice_label}")
            if avatar == current:
                font = QFont(item.font())
                font.setBold(True)
                item.setFont(font)
                item.setToolTip(f"{avatar.name}: the avatar now, speaking with "
                                f"{avatar.voice_label}")
            if avatar.missing:
                item.setForeground(QColor(150, 150, 150))
                item.setToolTip(avatar.missing_message)
            elif self._is_broken(avatar):
                item.setToolTip(self._broken[avatar.manifest][1])
            self.list.addItem(item)
        self.list.blockSignals(False)
        keep = (self.item_of(chosen) if chosen is not None else None) or (
            self.item_of(current) if current is not None else None) or self.list.item(0)
        self.list.setCurrentItem(keep)
        self._enable()

    def _icon(self, avatar: Avatar, in_use: bool) -> QIcon:
        """The cached thumbnail, or a placeholder while one is made (off this thread) or
        where none can be."""
        path = self.library.cached_thumbnail(avatar)
        if path is None:
            if not avatar.missing and not self._is_broken(avatar):
                self._make_thumbnail(avatar)
            mark = "…" if avatar.manifest in self.making else "?"
            return QIcon(_framed(_placeholder(mark), in_use))
        key = f"{path}|{in_use}"
        if key not in self._icons:
            self._icons[key] = QIcon(_framed(QPixmap(str(path)), in_use))
        return self._icons[key]

    def _make_thumbnail(self, avatar: Avatar) -> None:
        if avatar.manifest in self.making:
            return
        self.making.add(avatar.manifest)

        def make() -> None:
            try:
                self.library.thumbnail(avatar)
            except (RigError, PortraitError, OSError) as exc:
                self._thumbnail_made.emit(avatar, f"{avatar.name} cannot be shown: {_reason(exc)}")
            else:
                self._thumbnail_made.emit(avatar, None)

        self._worker.submit(make)

    def _is_broken(self, avatar: Avatar) -> bool:
        version, _ = self._broken.get(avatar.manifest, (None, ""))
        return avatar.manifest in self._broken and version == _version(avatar.manifest)

    def _on_thumbnail_made(self, avatar: Avatar, why: str | None) -> None:
        self.making.discard(avatar.manifest)
        if why is not None:
            self._broken[avatar.manifest] = (_version(avatar.manifest), why)
            self.told.emit(why, Severity.WARNING)
        item = self.item_of(avatar)
        if item is not None:
            current = self.library.in_use(self.in_use)
            item.setIcon(self._icon(item.data(AVATAR), item.data(AVATAR) == current))
            if why is not None:
                item.setToolTip(why)

    def _enable(self, *_) -> None:
        avatar = self.selected
        self.use_button.setEnabled(avatar is not None and not avatar.missing)
        self.rename_button.setEnabled(avatar is not None and not avatar.bundled)
        self.delete_button.setEnabled(avatar is not None and not avatar.bundled)

    # -- what the user does ---------------------------------------------------------

    def use(self, avatar: Avatar | None) -> None:
        if avatar is None:
            return
        if avatar.missing:
            self.told.emit(avatar.missing_message, Severity.WARNING)
            return
        self.chosen.emit(avatar)

    def start_rename(self, avatar: Avatar | None) -> None:
        item = self.item_of(avatar) if avatar is not None and not avatar.bundled else None
        if item is not None:
            self.list.setCurrentItem(item)
            self.list.editItem(item)

    def _renamed(self, item: QListWidgetItem) -> None:
        avatar = item.data(AVATAR)
        if item.text() == avatar.name:
            return
        try:
            self.library.rename(avatar, item.text())
        except (LibraryError, OSError) as exc:
            self.told.emit(f"{avatar.name} keeps its name: {_reason(exc)}", Severity.WARNING)
        self.refresh()

    def ask_to_remove(self, avatar: Avatar | None) -> None:
        """Asks first (window-modal, so the avatar keeps talking meanwhile): a photo
        avatar's folder is deleted with it."""
        if avatar is None or avatar.bundled:
            return
        what = ("its folder is deleted too; importing the picture again makes it anew"
                if self.library.deletes_files(avatar) else "its files are left where they are")
        self.confirm = QMessageBox(QMessageBox.Icon.Question, "Delete avatar",
                                   f"Delete {avatar.name} from the library? ({what}.)",
                                   QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                                   self)
        self.confirm.setDefaultButton(QMessageBox.StandardButton.No)
        self.confirm.accepted.connect(lambda: self.remove(avatar))  # Yes: the accepting button
        self.confirm.open()

    def remove(self, avatar: Avatar) -> None:
        in_use = self.library.in_use(self.in_use) == avatar
        try:
            removed = self.library.remove(avatar)
        except (LibraryError, OSError) as exc:
            self.told.emit(f"{avatar.name} was not deleted: {_reason(exc)}", Severity.WARNING)
            self.refresh()
            return
        if in_use:
            self.told.emit(f"{removed.message} It was the avatar: the bundled avatar is shown "
                           "now.", Severity.INFO)
            self.chosen.emit(self.library.avatars[0])
        else:
            self.told.emit(removed.message, Severity.INFO)
        self.refresh()

    def _context_menu(self, where) -> None:
        item = self.list.itemAt(where)
        if item is None:
            return
        self.list.setCurrentItem(item)
        avatar = item.data(AVATAR)
        menu = QMenu(self)
        menu.addAction("Use", lambda: self.use(avatar)).setEnabled(not avatar.missing)
        if not avatar.bundled:
            menu.addAction("Rename", lambda: self.start_rename(avatar))
            menu.addAction("Delete…", lambda: self.ask_to_remove(avatar))
        self._voice_menu(menu.addMenu("Voice"), avatar)
        menu.addSeparator()
        menu.addAction("Bundled avatar", lambda: self.use(self.library.avatars[0]))
        self.menu = menu
        menu.popup(self.list.viewport().mapToGlobal(where))

    def _voice_menu(self, menu: QMenu, avatar: Avatar) -> None:
        """The installed voices (a multi-speaker one with a speaker each), the avatar's
        own checked."""
        def add(into: QMenu, label: str, voice: str | None, speaker: int) -> None:
            action = into.addAction(label, lambda: self.set_voice(avatar, voice, speaker))
            action.setCheckable(True)
            action.setChecked(avatar.voice == voice
                              and (voice is None or avatar.voice_speaker == speaker))

        add(menu, SETTINGS_VOICE.capitalize(), None, 0)
        menu.addSeparator()
        for voice in catalogue().voices:
            if voice.speakers:
                speakers = menu.addMenu(voice.name)
                for number, speaker in enumerate(voice.speakers):
                    add(speakers, speaker, voice.name, number)
            else:
                add(menu, voice.name, voice.name, 0)

    def set_voice(self, avatar: Avatar, voice: str | None, speaker: int = 0) -> None:
        try:
            changed = self.library.set_voice(avatar, voice, speaker)
        except (LibraryError, OSError) as exc:
            self.told.emit(f"{avatar.name} keeps its voice: {_reason(exc)}", Severity.WARNING)
            return
        self.told.emit(f"{changed.name} speaks with {changed.voice_label} now.", Severity.INFO)
        self.voice_changed.emit(changed)
        self.refresh()


def _version(manifest: Path) -> int | None:
    try:
        return manifest.stat().st_mtime_ns
    except OSError:
        return None


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return f"{exc.filename or 'the library'} could not be written ({exc.strerror or exc})."
    return getattr(exc, "message", None) or str(exc)


def _placeholder(mark: str) -> QPixmap:
    """`mark` where there is no thumbnail: "…" while one is made, "?" where none can be
    (a missing or broken rig)."""
    pixmap = QPixmap(THUMBNAIL_PX, THUMBNAIL_PX)
    pixmap.fill(QColor(60, 60, 60))
    painter = QPainter(pixmap)
    font = painter.font()
    font.setPixelSize(THUMBNAIL_PX // 2)
    painter.setFont(font)
    painter.setPen(QColor(170, 170, 170))
    painter.drawText(pixmap.rect(), Qt.AlignmentFlag.AlignCenter, mark)
    painter.end()
    return pixmap


def _framed(pixmap: QPixmap, in_use: bool) -> QPixmap:
    if not in_use:
        return pixmap
    framed = QPixmap(pixmap)
    painter = QPainter(framed)
    painter.setPen(QPen(FRAME_COLOUR, FRAME_PX))
    painter.drawRect(framed.rect().adjusted(FRAME_PX // 2, FRAME_PX // 2,
                                            -FRAME_PX // 2, -FRAME_PX // 2))
    painter.end()
    return framed
