"""The traffic split as one stacked bar: a segment per pool, as wide as its share, labelled with its %."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

from sparksync.gui.dashboard.palette import FOREGROUND

EMPTY = "#3a4048"


class SplitBar(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("splitBar")
        self.setMinimumHeight(24)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._parts: list[tuple[str, float, QColor]] = []

    def set_shares(self, parts: list[tuple[str, float, QColor]]) -> None:
        """(pool, share 0..1, colour) in order; all-zero shares draw an empty bar."""
        self._parts = list(parts)
        self.setToolTip("\n".join(f"{name}: {share:.0%}" for name, share, _ in parts))
        self.update()

    def text(self) -> str:
        """The labels as drawn, e.g. "small 75% | large 25%" (for the readout and tests)."""
        return " | ".join(f"{name} {share:.0%}" for name, share, _ in self._parts)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        area = QRectF(self.rect()).adjusted(0, 2, 0, -2)
        painter.fillRect(area, QColor(EMPTY))
        x = area.left()
        for name, share, colour in self._parts:
            width = area.width() * max(0.0, min(share, 1.0))
            if width <= 0:
                continue
            segment = QRectF(x, area.top(), width, area.height())
            painter.fillRect(segment, colour)
            label = f"{name} {share:.0%}"
            if painter.fontMetrics().horizontalAdvance(label) + 6 < width:
                painter.setPen(QColor("#101418"))
                painter.drawText(segment, Qt.AlignmentFlag.AlignCenter, label)
            x += width
        if not any(share > 0 for _, share, _ in self._parts):
            painter.setPen(QColor(FOREGROUND))
            painter.drawText(area, Qt.AlignmentFlag.AlignCenter, "no requests yet")
        painter.end()
