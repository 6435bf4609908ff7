"""The time window the plots show: 1 min, 10 min or 1 h."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QButtonGroup, QHBoxLayout, QLabel, QToolButton, QWidget

WINDOWS: tuple[tuple[float, str], ...] = ((60.0, "1 min"), (600.0, "10 min"), (3600.0, "1 h"))
DEFAULT_WINDOW_S = 600.0


class WindowPicker(QWidget):
    window_changed = Signal(float)  # seconds

    def __init__(self, parent: QWidget | None = None, window_s: float = DEFAULT_WINDOW_S):
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(QLabel("Window:"))
        self._group = QButtonGroup(self)
        self._group.setExclusive(True)
        self.buttons: dict[float, QToolButton] = {}
        for seconds, text in WINDOWS:
            button = QToolButton(self)
            button.setText(text)
            button.setCheckable(True)
            button.setObjectName(f"window_{int(seconds)}s")
            button.setToolTip(f"Show the last {text}")
            self._group.addButton(button)
            self.buttons[seconds] = button
            layout.addWidget(button)
        self.buttons[window_s].setChecked(True)
        self._group.buttonToggled.connect(self._on_group_button_toggled)

    @property
    def window_s(self) -> float:
        return next(s for s, b in self.buttons.items() if b.isChecked())

    def set_window(self, seconds: float) -> None:
        if seconds not in self.buttons:
            raise ValueError(f"the window must be one of {[s for s, _ in WINDOWS]} seconds, not {seconds}")
        self.buttons[seconds].setChecked(True)

    def _on_group_button_toggled(self, button: QToolButton, checked: bool) -> None:
        if checked:
            self.window_changed.emit(self.window_s)
