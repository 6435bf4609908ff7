"""One drawn link: a line between two places on the canvas and its live-rate label."""

from __future__ import annotations

import math

from PySide6.QtCore import QLineF, QPointF, Qt
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import (
    QGraphicsEllipseItem,
    QGraphicsLineItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
)

from sparksync.core.topology import Link, LinkKind, TopologyWarning
from sparksync.core.base import format_bits_per_s

NORMAL_COLOR = QColor("#7a869a")
WARNING_COLOR = QColor("#d9480f")
LABEL_COLOR = QColor("#1f2933")
PARALLEL_GAP = 14.0  # pixels between two cables joining the same two nodes
LABEL_BACKGROUND = QColor(255, 255, 255, 225)  # keeps a label readable over the lines it crosses
LABEL_PAD = 3.0
NODE_COLOR, SWITCH_COLOR = QColor("#2b6cb0"), QColor("#4a5568")


def add_node_item(scene: QGraphicsScene, name: str, x: float, y: float, size: float, switch: bool) -> None:
    """A node (a disc) or a switch (a flat box) at ``x, y``, its name on a label under it."""
    half = size / 2
    if switch:
        shape: QGraphicsRectItem | QGraphicsEllipseItem = QGraphicsRectItem(x - half, y - half * 0.6, size, size * 0.6)
    else:
        shape = QGraphicsEllipseItem(x - half, y - half, size, size)
    shape.setBrush(QBrush(SWITCH_COLOR if switch else NODE_COLOR))
    shape.setPen(QPen(QColor("white"), 1.5))
    shape.setToolTip(name)
    scene.addItem(shape)
    text = QGraphicsSimpleTextItem(name)
    box = text.boundingRect()
    back = QGraphicsRectItem(box.adjusted(-2, -1, 2, 1))
    back.setBrush(QBrush(LABEL_BACKGROUND))
    back.setPen(QPen(Qt.PenStyle.NoPen))
    text.setParentItem(back)
    back.setPos(x - box.width() / 2, y + half + 2)
    scene.addItem(back)


class EdgeItem:
    """A link's line and label; ``update`` changes its rates and warning state in place."""

    def __init__(self, scene: QGraphicsScene, key: str):
        self.key = key
        self.line = QGraphicsLineItem()
        self.line.setZValue(-1)  # under the nodes
        self.label_box = QGraphicsRectItem()
        self.label_box.setBrush(QBrush(LABEL_BACKGROUND))
        self.label_box.setPen(QPen(Qt.PenStyle.NoPen))
        self.label = QGraphicsSimpleTextItem(self.label_box)
        self.label.setBrush(QBrush(LABEL_COLOR))
        scene.addItem(self.line)
        scene.addItem(self.label_box)
        self.warned = False
        self._at: QPointF | None = None

    def place(self, start: tuple[float, float], end: tuple[float, float], offset: float = 0.0,
              label_at: float = 0.5) -> None:
        """Draw from ``start`` to ``end``, shifted sideways by ``offset`` (parallel cables); the label sits
        ``label_at`` of the way along."""
        (x1, y1), (x2, y2) = start, end
        length = math.hypot(x2 - x1, y2 - y1) or 1.0
        nx, ny = -(y2 - y1) / length * offset, (x2 - x1) / length * offset
        line = QLineF(QPointF(x1 + nx, y1 + ny), QPointF(x2 + nx, y2 + ny))
        self.line.setLine(line)
        self._at = line.pointAt(label_at)
        self._center_label()

    def update(self, link: Link, warnings: list[TopologyWarning]) -> None:
        self.warned = bool(warnings)
        pen = QPen(WARNING_COLOR if self.warned else NORMAL_COLOR, 3.5 if self.warned else 2.0)
        pen.setStyle(Qt.PenStyle.DashLine if self.warned else Qt.PenStyle.SolidLine)
        self.line.setPen(pen)
        self.label.setText(rate_text(link))
        self.label.setBrush(QBrush(WARNING_COLOR if self.warned else LABEL_COLOR))
        tip = [port_text(p) for p in link.ports] + [w.message for w in warnings]
        self.line.setToolTip("\n".join([f"{link.kind.value} on {link.network}", *tip]))
        self.label.setToolTip(self.line.toolTip())
        self._center_label()

    def _center_label(self) -> None:
        box = self.label.boundingRect().adjusted(-LABEL_PAD, -LABEL_PAD, LABEL_PAD, LABEL_PAD)
        self.label_box.setRect(box)
        if self._at is not None:
            self.label_box.setPos(self._at.x() - box.center().x(), self._at.y() - box.center().y())


def rate_text(link: Link) -> str:
    """Each direction as '<sender> → <rate>', in bits/s as links are rated."""
    sender_b = "switch" if link.kind is LinkKind.switch else link.b
    return (f"{link.a} → {format_bits_per_s(link.a_to_b_bits_per_s)}\n"
            f"{sender_b} → {format_bits_per_s(link.b_to_a_bits_per_s)}")


def port_text(port) -> str:
    speed = "speed unknown" if port.speed_mbps is None else format_bits_per_s(port.speed_mbps * 1e6)
    mtu = "MTU unknown" if port.mtu is None else f"MTU {port.mtu}"
    return f"{port.label} {port.interface}: {speed}, {mtu}"
