"""Toggles for each node and each kind of series; they double as the plots' legend.

A curve is shown when both its node and its kind are ticked. Nodes carry
their colour, kinds their line style, so this panel is where a reader
learns which line is which.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QCheckBox, QGroupBox, QVBoxLayout, QWidget

from sparksync.core.telemetry import KINDS, split_name
from sparksync.gui.dashboard.palette import pen

SWATCH = (28, 12)


class SeriesToggles(QWidget):
    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self._nodes_box, self._nodes_layout = self._group("Nodes")
        self._kinds_box, self._kinds_layout = self._group("Series")
        layout.addWidget(self._nodes_box)
        layout.addWidget(self._kinds_box)
        layout.addStretch(1)
        self.node_boxes: dict[str, QCheckBox] = {}
        self.kind_boxes: dict[str, QCheckBox] = {}

    def add_node(self, node: str, label: str, colour: QColor) -> None:
        if node not in self.node_boxes:
            box = self._checkbox(label, _swatch(colour, "solid"), f"node:{node}")
            self.node_boxes[node] = box
            self._nodes_layout.addWidget(box)

    def add_kind(self, kind: str) -> None:
        if kind in self.kind_boxes:
            return
        spec = KINDS[kind]
        box = self._checkbox(spec.label, _swatch(QColor("#c8ccd0"), spec.style), f"kind:{kind}")
        self.kind_boxes[kind] = box
        order = list(KINDS)
        position = sum(1 for k in self.kind_boxes if order.index(k) < order.index(kind))
        self._kinds_layout.insertWidget(position, box)

    def is_shown(self, node: str, name: str) -> bool:
        node_box = self.node_boxes.get(node)
        kind_box = self.kind_boxes.get(split_name(name)[0])
        return (node_box is None or node_box.isChecked()) and (kind_box is None or kind_box.isChecked())

    def set_node_shown(self, node: str, shown: bool) -> None:
        self.node_boxes[node].setChecked(shown)

    def set_kind_shown(self, kind: str, shown: bool) -> None:
        self.kind_boxes[kind].setChecked(shown)

    def _group(self, title: str) -> tuple[QGroupBox, QVBoxLayout]:
        box = QGroupBox(title, self)
        layout = QVBoxLayout(box)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.setSpacing(2)
        return box, layout

    def _checkbox(self, text: str, icon: QIcon, name: str) -> QCheckBox:
        box = QCheckBox(text, self)
        box.setObjectName(name)
        box.setIcon(icon)
        box.setIconSize(QPixmap(*SWATCH).size())
        box.setChecked(True)
        box.toggled.connect(self._on_box_toggled)
        return box

    def _on_box_toggled(self, _checked: bool) -> None:
        self.changed.emit()


def _swatch(colour: QColor, style: str) -> QIcon:
    pixmap = QPixmap(*SWATCH)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    line = pen(colour, style, width=2.5)
    painter.setPen(line)
    painter.drawLine(QPointF(1, SWATCH[1] / 2), QPointF(SWATCH[0] - 1, SWATCH[1] / 2))
    painter.end()
    return QIcon(pixmap)
