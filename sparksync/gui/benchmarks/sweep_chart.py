"""A Switchyard sweep drawn with pyqtgraph: score against throughput, with the published points.

It draws ``sweep_chart.chart_data`` (the same data as the CLI's PNG): each
point at (throughput over large-only, score) with its label, the anchor at
1x, a dashed line at large-only's score (score parity), and the published
prototype's points (1.5x at 1/2 large, 3.0x at 1/4) on that line as stars.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QWidget

from sparksync.switchyard.eval.sweep import SweepReport
from sparksync.switchyard.eval.sweep_chart import (
    ANCHOR_COLOR,
    MEASURED_COLOR,
    PARITY_COLOR,
    PUBLISHED_COLOR,
    ChartData,
    chart_data,
)


LABEL_FONT = QFont()
LABEL_FONT.setPointSize(8)


class SweepChart(pg.PlotWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent, background="w")
        self.setObjectName("sweepChart")
        self.plot_item = self.getPlotItem()
        self.plot_item.setLabel("bottom", "aggregate output tokens/s, × large only")
        self.plot_item.setLabel("left", "score (0-100)")
        self.plot_item.showGrid(x=True, y=True, alpha=0.2)
        self.plot_item.addLegend(offset=(10, -10))
        self.plot_item.setYRange(-5, 105)
        self.data: ChartData | None = None
        self.labels: list[str] = []  # every text drawn beside a point, for tests and screen readers

    def show_report(self, report: SweepReport) -> None:
        self.plot_item.clear()
        self.labels = []
        data = self.data = chart_data(report)
        self.plot_item.setTitle(report.summary(), size="9pt")
        parity = pg.InfiniteLine(pos=data.parity_score, angle=0,
                                 pen=pg.mkPen(PARITY_COLOR, width=1, style=Qt.PenStyle.DashLine))  # fmt: skip
        self.plot_item.addItem(parity)
        # Published labels above the parity line, ours below it: points at parity would overlap.
        self._points(data.published, PUBLISHED_COLOR, "star", 16, "published (at score parity)", above=True)
        self._points([data.anchor], ANCHOR_COLOR, "s", 10, "large only (anchor)", above=False)
        self._points(data.measured, MEASURED_COLOR, "o", 10, "measured", above=False)
        xs = [m.x for m in (*data.published, data.anchor, *data.measured)]
        self.plot_item.setXRange(0, max(xs) * 1.3 if xs else 4)  # room for the rightmost label

    def _points(self, marks, color: str, symbol: str, size: int, name: str, above: bool) -> None:
        if not marks:
            return
        self.plot_item.plot([m.x for m in marks], [m.y for m in marks], pen=None, symbol=symbol,
                            symbolBrush=color, symbolPen=color, symbolSize=size, name=name)  # fmt: skip
        for mark in marks:
            text = pg.TextItem(mark.label, color=color, anchor=(0, 1) if above else (0, 0))
            text.setFont(LABEL_FONT)
            text.setPos(mark.x, mark.y)
            self.plot_item.addItem(text)
            self.labels.append(mark.label)
