"""The avatar's expressions in the window: a list to pick one from, following what
hotkeys and the API choose too (the studio's expression_changed)."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox

from app.studio import Studio


class ExpressionPicker(QComboBox):
    def __init__(self, studio: Studio) -> None:
        super().__init__()
        self.studio = studio
        self.setToolTip("The avatar's expression (hotkeys Ctrl+Alt+0…4 by default, or the API)")
        self.refresh()
        self.activated.connect(lambda index: studio.set_expression(self.itemData(index)))
        studio.expression_changed.connect(lambda _name: self.refresh())
        studio.avatar_changed.connect(self.refresh)

    def refresh(self) -> None:
        """The avatar's expressions, the one shown now chosen."""
        self.blockSignals(True)
        self.clear()
        for name in self.studio.expressions:
            self.addItem(name.capitalize(), name)
        self.setCurrentIndex(max(0, self.findData(self.studio.expression)))
        self.setEnabled(self.count() > 1)
        self.blockSignals(False)
