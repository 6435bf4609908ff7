"""The tray icons, drawn: the cluster's health as the colour of a dot on the app's dark tile."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPen, QPixmap

from sparksync.core.telemetry import Health

SIZE = 64
COLOURS = {
    Health.ONLINE: "#76b900",  # all nodes online
    Health.DEGRADED: "#f0a020",  # some nodes missing or degraded
    Health.OFFLINE: "#c0392b",  # no node online
}
_cache: dict[Health, QIcon] = {}


def health_icon(health: Health) -> QIcon:
    if health not in _cache:
        _cache[health] = QIcon(_draw(QColor(COLOURS[health])))
    return _cache[health]


def _draw(colour: QColor) -> QPixmap:
    pixmap = QPixmap(SIZE, SIZE)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor("#1b1f24"))
    painter.drawRoundedRect(QRectF(2, 2, SIZE - 4, SIZE - 4), 12, 12)
    painter.setPen(QPen(QColor("#76b900"), 3))  # four linked nodes, as in the app's logo
    painter.setBrush(Qt.BrushStyle.NoBrush)
    for x, y in ((32, 14), (50, 32), (32, 50), (14, 32)):
        painter.drawEllipse(QRectF(x - 4, y - 4, 8, 8))
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(colour)
    painter.drawEllipse(QRectF(20, 20, 24, 24))
    painter.end()
    return pixmap
