"""The cluster assistant's drawing: the detected (or planned) cabling, problems and acceptance figures on it.

It draws a core ``Drawing`` as it is: nodes on a circle, switches in the
middle, an edge per cable or per node's switch port. An edge with a problem
(from detection) or a flagged acceptance figure is drawn thick, dashed and
orange, its label says why; a checked healthy edge is green.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QLineF, QPointF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPen
from PySide6.QtWidgets import (
    QGraphicsLineItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
    QWidget,
)

from sparksync.core.fabric import Drawing, DrawnEdge
from sparksync.core.fabric import Verdict
from sparksync.gui.topology.edge_item import LABEL_BACKGROUND, NORMAL_COLOR, WARNING_COLOR, add_node_item

NODE_RADIUS, SWITCH_RADIUS, NODE_SIZE = 230.0, 60.0, 54.0
GOOD_COLOR = QColor("#2f9e44")


class CablingCanvas(QGraphicsView):
    def __init__(self, parent: QWidget | None = None):
        self._scene = QGraphicsScene()
        super().__init__(self._scene, parent)
        self._scene.setParent(self)
        self.setObjectName("cablingCanvas")
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.drawing: Drawing | None = None
        self.edge_items: dict[str, tuple[QGraphicsLineItem, QGraphicsSimpleTextItem]] = {}
        self._empty("Detect the cabling to see it here.")

    def show_drawing(self, drawing: Drawing) -> None:
        self.drawing = drawing
        scene = self._scene
        scene.clear()
        self.edge_items = {}
        places = _circle(drawing.nodes, NODE_RADIUS if len(drawing.nodes) > 1 else 0.0)
        places.update(_circle(drawing.switches, SWITCH_RADIUS if len(drawing.switches) > 1 else 0.0))
        seen: dict[frozenset, int] = {}
        for edge in drawing.edges:
            if edge.a not in places or edge.b not in places:
                continue
            pair = frozenset((edge.a, edge.b))
            nth = seen[pair] = seen.get(pair, -1) + 1
            self._edge(edge, places[edge.a], places[edge.b], nth, switch=edge.b in drawing.switches)
        for name in drawing.nodes:
            self._place(name, places[name], switch=False)
        for name in drawing.switches:
            self._place(name, places[name], switch=True)
        self._fit()

    def clear_drawing(self, text: str) -> None:
        self.drawing = None
        self._scene.clear()
        self.edge_items = {}
        self._empty(text)

    def label_of(self, key: str) -> str:
        return self.edge_items[key][1].text()

    def is_marked(self, key: str) -> bool:
        return self.edge_items[key][0].pen().color() == WARNING_COLOR

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit()

    # --- internals --------------------------------------------------------------------------

    def _empty(self, text: str) -> None:
        item = self._scene.addSimpleText(text)
        item.setBrush(QBrush(NORMAL_COLOR))

    def _fit(self) -> None:
        if self._scene.items():
            self.fitInView(self._scene.itemsBoundingRect().adjusted(-40, -30, 40, 30),
                           Qt.AspectRatioMode.KeepAspectRatio)

    def _edge(self, edge: DrawnEdge, start: tuple[float, float], end: tuple[float, float], nth: int,
              switch: bool) -> None:
        (x1, y1), (x2, y2) = start, end
        length = math.hypot(x2 - x1, y2 - y1) or 1.0
        offset = 0.0 if nth == 0 else math.ceil(nth / 2) * 16.0 * (1 if nth % 2 else -1)
        nx, ny = -(y2 - y1) / length * offset, (x2 - x1) / length * offset
        line = QLineF(QPointF(x1 + nx, y1 + ny), QPointF(x2 + nx, y2 + ny))
        item = QGraphicsLineItem(line)
        item.setZValue(-1)
        if edge.marked:
            pen = QPen(WARNING_COLOR, 4.0)
            pen.setStyle(Qt.PenStyle.DashLine)
        elif edge.verdict is Verdict.passed:
            pen = QPen(GOOD_COLOR, 3.0)
        else:
            pen = QPen(NORMAL_COLOR, 2.0)
        item.setPen(pen)
        lines = [edge.label] if edge.label else []
        lines += edge.problems[:1]
        if edge.headline:
            lines += edge.headline.splitlines()
        text = "\n".join(_short(line) for line in lines)
        tip = "\n".join([edge.key, *edge.problems, *edge.figures])
        item.setToolTip(tip)
        self._scene.addItem(item)
        label = QGraphicsSimpleTextItem(text)
        label.setBrush(QBrush(WARNING_COLOR if edge.marked else QColor("#1f2933")))
        box = label.boundingRect().adjusted(-3, -2, 3, 2)
        back = QGraphicsRectItem(box)
        back.setBrush(QBrush(LABEL_BACKGROUND))
        back.setPen(QPen(Qt.PenStyle.NoPen))
        label.setParentItem(back)
        back.setToolTip(tip)
        at = line.pointAt(0.5)
        # A label on a flat edge sits above it, clear of the nodes at both ends; others sit on the edge.
        lift = box.height() / 2 + 6 if abs(x2 - x1) > abs(y2 - y1) else 0.0
        back.setPos(at.x() - box.center().x(), at.y() - box.center().y() - lift)
        back.setZValue(1)
        self._scene.addItem(back)
        self.edge_items[edge.key] = (item, label)

    def _place(self, name: str, where: tuple[float, float], switch: bool) -> None:
        add_node_item(self._scene, name, *where, NODE_SIZE, switch)


def _short(line: str, limit: int = 60) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _circle(names: list[str], radius: float) -> dict[str, tuple[float, float]]:
    count = max(1, len(names))
    return {name: (radius * math.sin(2 * math.pi * i / count), -radius * math.cos(2 * math.pi * i / count))
            for i, name in enumerate(names)}
