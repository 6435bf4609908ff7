"""Tabs for what is coming: each says what it will show, so nobody takes it for a broken view."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

PLACEHOLDERS: dict[str, str] = {
    "Workloads": (
        "Running workloads will be listed here: the inference and training jobs placed on your nodes, "
        "with start, stop, their logs and their tokens/s. Until then, plan one with `sparksync plan`."
    ),
    "Benchmarks": (
        "Benchmark results will be shown here, with scaling charts across 1 to 8 nodes. "
        "Until then, run one with `sparksync bench` and see its report there."
    ),
    "Topology": (
        "The cluster's topology will be drawn here: nodes, their fabric links (direct, ring or switch) "
        "with live link rates, and a warning when a link runs below its expected speed or MTU."
    ),
}


class PlaceholderTab(QWidget):
    def __init__(self, title: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName(f"placeholder{title}")
        layout = QVBoxLayout(self)
        self.label = QLabel(f"<h3>{title}</h3><p>{PLACEHOLDERS[title]}</p>", self)
        self.label.setWordWrap(True)
        self.label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.label.setMaximumWidth(640)
        layout.addStretch(1)
        layout.addWidget(self.label, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addStretch(2)
