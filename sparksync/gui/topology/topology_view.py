"""The Topology tab: the cluster's nodes, their fabric links with live rates, and warnings beside.

Samples arrive from the telemetry feeds (``add_sample``) and are only kept
(the latest per node); a timer at ``REFRESH_MS`` infers the topology from
them (core, pure computation, no I/O) and updates the drawing. The canvas is
rebuilt only when a node or a link appears or goes; otherwise the labels and
pens change in place.
"""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QBrush, QPainter, QShowEvent
from PySide6.QtWidgets import (
    QGraphicsScene,
    QGraphicsView,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QSplitter,
    QVBoxLayout,
    QWidget,
)
from sparksync_agent.protocol import Sample, Snapshot

from sparksync.core.topology import (
    ClusterTopology,
    Link,
    LinkKind,
    TopologyKind,
    TopologySettings,
    build_topology,
)
from sparksync.core.base import format_bits_per_s
from sparksync.gui.topology.edge_item import PARALLEL_GAP, WARNING_COLOR, EdgeItem, add_node_item
from sparksync.gui.topology.layout import positions

REFRESH_MS = 1000  # links change slowly; once a second is plenty and costs nothing
STALE_S = 10.0  # a node silent this long (against the newest sample) is drawn without links
NODE_SIZE = 56.0
SIDE_MAX_WIDTH = 380
SWITCH_LABEL_AT = 0.4
CANVAS_MIN_WIDTH = 360
MAX_ZOOM = 1.5  # a lone node is drawn about this big, not stretched across the tab

_KIND_TEXT = {
    TopologyKind.none: "no fabric links seen yet",
    TopologyKind.direct: "direct cable",
    TopologyKind.ring: "ring",
    TopologyKind.switch: "switch",
    TopologyKind.mixed: "mixed (neither a direct pair, a closed ring nor a switch)",
}


class TopologyView(QWidget):
    refreshed = Signal(object)  # the ClusterTopology just drawn

    def __init__(self, parent: QWidget | None = None, *, settings: TopologySettings | None = None,
                 refresh_ms: int = REFRESH_MS):
        super().__init__(parent)
        self.setObjectName("topologyView")
        self.settings = settings or TopologySettings()
        self.topology: ClusterTopology | None = None
        self.edges: dict[str, EdgeItem] = {}
        self.places: dict[str, tuple[float, float]] = {}
        self._samples: dict[str, Sample | None] = {}
        self._changed = False
        self._shape: tuple = ()
        self._build()
        self.timer = QTimer(self)
        self.timer.setInterval(refresh_ms)
        self.timer.timeout.connect(self._on_timer_timeout)
        self.timer.start()

    def _build(self) -> None:
        self.scene = QGraphicsScene(self)
        self.canvas = QGraphicsView(self.scene, self)
        self.canvas.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.summary = QLabel(self)
        self.summary.setObjectName("topologySummary")
        self.summary.setWordWrap(True)
        self.warnings = QListWidget(self)
        self.warnings.setObjectName("topologyWarnings")
        self.warnings.setWordWrap(True)
        side = QWidget(self)
        column = QVBoxLayout(side)
        column.addWidget(self.summary)
        column.addWidget(QLabel("<b>Warnings</b>", side))
        column.addWidget(self.warnings, 1)
        side.setMaximumWidth(SIDE_MAX_WIDTH)
        self.canvas.setMinimumWidth(CANVAS_MIN_WIDTH)
        splitter = QSplitter(self)
        splitter.addWidget(self.canvas)
        splitter.addWidget(side)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([CANVAS_MIN_WIDTH * 2, SIDE_MAX_WIDTH])
        QHBoxLayout(self).addWidget(splitter)
        self._show_summary(None)

    # --- feeding ---------------------------------------------------------------------

    @Slot(str, object)
    def add_sample(self, node: str, sample: Sample) -> None:
        """Keep ``node``'s latest sample; the next refresh draws it."""
        if sample.net is None and node in self._samples:
            return  # a sample without interfaces says nothing new about the links
        self._samples[node] = sample
        self._changed = True

    @Slot(str, object)
    def add_snapshot(self, node: str, snapshot: Snapshot) -> None:
        if snapshot.latest is not None:
            self.add_sample(node, snapshot.latest)
        elif node not in self._samples:
            self._samples[node] = None
            self._changed = True

    def set_settings(self, settings: TopologySettings) -> None:
        self.settings = settings
        self._changed = True

    # --- drawing ---------------------------------------------------------------------

    def refresh(self) -> ClusterTopology:
        """Infer the topology from the latest samples and draw it now."""
        self._changed = False
        topology = build_topology(self._fresh_samples(), self.settings)
        shape = (topology.nodes, topology.switches, tuple(link.key for link in topology.links))
        if shape != self._shape:
            self._redraw(topology)
            self._shape = shape
        self._update_edges(topology)
        self._show_summary(topology)
        self._show_warnings(topology)
        self.topology = topology
        self.refreshed.emit(topology)
        return topology

    def edge_for(self, link: Link) -> EdgeItem:
        return self.edges[link.key]

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._changed:
            self.refresh()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        if self.scene.items():
            self.canvas.fitInView(self.scene.itemsBoundingRect().adjusted(-60, -40, 60, 40),
                                  Qt.AspectRatioMode.KeepAspectRatio)
            # One node (or two close ones) would be blown up to fill the canvas: never beyond MAX_ZOOM.
            if self.canvas.transform().m11() > MAX_ZOOM:
                self.canvas.resetTransform()
                self.canvas.scale(MAX_ZOOM, MAX_ZOOM)
                self.canvas.centerOn(self.scene.itemsBoundingRect().center())

    def zoom(self) -> float:
        """How much the drawing is enlarged on the canvas (1: natural size)."""
        return self.canvas.transform().m11()

    def _on_timer_timeout(self) -> None:
        if self._changed and self.isVisible():
            self.refresh()

    def _fresh_samples(self) -> dict[str, Sample | None]:
        newest = max((s.ts for s in self._samples.values() if s is not None), default=-math.inf)
        return {n: s if s is not None and s.ts >= newest - STALE_S else None for n, s in self._samples.items()}

    def _redraw(self, topology: ClusterTopology) -> None:
        self.scene.clear()  # deletes the old edges' items too
        self.edges = {}
        self.places = positions(topology)
        for name in topology.nodes:
            self._add_place(name, switch=False)
        for name in topology.switches:
            self._add_place(name, switch=True)
        seen: dict[frozenset, int] = {}
        for link in topology.links:
            pair = frozenset((link.a, link.b))
            nth = seen[pair] = seen.get(pair, -1) + 1
            edge = self.edges[link.key] = EdgeItem(self.scene, link.key)
            # On a switch the labels would crowd the middle: put them nearer each node.
            label_at = SWITCH_LABEL_AT if link.kind is LinkKind.switch else 0.5
            edge.place(self.places[link.a], self.places[link.b], _offset(nth), label_at)
        self._fit()

    def _add_place(self, name: str, switch: bool) -> None:
        add_node_item(self.scene, name, *self.places[name], NODE_SIZE, switch)

    def _update_edges(self, topology: ClusterTopology) -> None:
        for link in topology.links:
            self.edges[link.key].update(link, topology.warnings_for(link))

    def _show_summary(self, topology: ClusterTopology | None) -> None:
        if topology is None or not topology.nodes:
            self.summary.setText("<b>Topology</b><br>Waiting for the nodes' telemetry.")
            return
        traffic = format_bits_per_s(topology.total_bits_per_s)
        self.summary.setText(
            f"<b>Topology: {_KIND_TEXT[topology.kind]}</b><br>{len(topology.nodes)} node(s), "
            f"{len(topology.links)} link(s), {len(topology.switches)} switch subnet(s)<br>"
            f"Fabric traffic: {traffic}" + _unlinked_text(topology))

    def _show_warnings(self, topology: ClusterTopology) -> None:
        self.warnings.clear()
        for warning in topology.warnings:
            item = QListWidgetItem(warning.message)
            item.setForeground(QBrush(WARNING_COLOR))
            self.warnings.addItem(item)
        if not topology.warnings:
            self.warnings.addItem(_no_warning_text(topology))

    def warning_texts(self) -> list[str]:
        if self.topology is None or not self.topology.warnings:
            return []
        return [self.warnings.item(i).text() for i in range(self.warnings.count())]


def _no_warning_text(topology: ClusterTopology) -> str:
    """No warning: with no fabric link yet there is nothing to vouch for, so say only that."""
    if not topology.links:
        if len(topology.nodes) < 2:
            return ("No fabric links yet: one node has no peer to cable to. "
                    "Pair a second node and connect their ConnectX-7 ports.")
        return "No fabric links yet: no two nodes share a fabric subnet (check the cables and addresses)."
    return "No problem found: every link runs at its expected speed with matching MTUs."


def _unlinked_text(topology: ClusterTopology) -> str:
    """Ports up with an address but nobody on their subnet: an unplugged cable or a peer not reporting."""
    if not topology.unlinked_ports:
        return ""
    ports = ", ".join(f"{p.label} ({p.interface})" for p in topology.unlinked_ports)
    return f"<br>Ports without a peer: {ports}"


def _offset(nth: int) -> float:
    """0, +gap, -gap, +2 gap ... so parallel cables spread on both sides of the centre line."""
    return 0.0 if nth == 0 else math.ceil(nth / 2) * PARALLEL_GAP * (1 if nth % 2 else -1)
