"""Light, dark, or whatever the desktop uses: Qt's colour scheme hint (Qt 6.8 and later)."""

from __future__ import annotations

import logging

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from sparksync.core.apps import Theme

log = logging.getLogger(__name__)

_SCHEMES = {
    Theme.SYSTEM: Qt.ColorScheme.Unknown,  # "unknown" hands the choice back to the platform
    Theme.LIGHT: Qt.ColorScheme.Light,
    Theme.DARK: Qt.ColorScheme.Dark,
}


def apply_theme(theme: Theme) -> bool:
    """Ask Qt for ``theme``; False where this Qt cannot set a scheme."""
    app = QApplication.instance()
    hints = app.styleHints() if app is not None else None
    if hints is None or not hasattr(hints, "setColorScheme"):
        log.info("this Qt cannot switch between light and dark; the desktop's scheme applies")
        return False
    hints.setColorScheme(_SCHEMES[theme])
    return True
