"""A scaling report drawn with pyqtgraph: tokens/s against nodes, and speed-up against the ideal.

Decode and prefill get their own plots (prefill runs hundreds of times
faster, so one axis would flatten decode). The planner's bound at each size
is drawn as a dashed line over the decode figures, so the gap to the
physical limit shows at a glance. ``image()`` renders the whole chart for a
PNG export (saving the file is left to a worker).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from pyqtgraph.exporters import ImageExporter
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QWidget

from sparksync.core.bench import ScalingReport

DECODE_COLOR, PREFILL_COLOR, IDEAL_COLOR, BOUND_COLOR = "#2b6cb0", "#dd6b20", "#718096", "#2f855a"
EXPORT_WIDTH = 1400


class ScalingChart(pg.GraphicsLayoutWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setBackground("w")
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.error_bars: dict[str, pg.ErrorBarItem] = {}  # the std over runs of each figure, by curve name
        self.throughput = self._plot(0, "tokens/s by nodes", "decode tok/s")
        self.prefill = self._plot(1, "prefill tokens/s by nodes", "prefill tok/s")
        self.speedup = self._plot(2, "speed-up against 1 node", "× one node")
        self.report: ScalingReport | None = None

    def _plot(self, column: int, title: str, y_label: str) -> pg.PlotItem:
        plot = self.addPlot(row=0, col=column, title=title)
        plot.setLabel("bottom", "nodes")
        plot.setLabel("left", y_label)
        plot.showGrid(x=True, y=True, alpha=0.2)
        plot.addLegend(offset=(10, 10))
        return plot

    def show_report(self, report: ScalingReport) -> None:
        self.report = report
        for plot in (self.throughput, self.prefill, self.speedup):
            plot.clear()
        self.curves, self.error_bars = {}, {}
        rows = report.rows
        sizes = [float(r.cluster_size) for r in rows]
        inference = report.kind == "inference"
        self.throughput.setLabel("left", "decode tok/s" if inference else "training tok/s")
        self._curve(self.throughput, "decode" if inference else "training", sizes,
                    [r.throughput for r in rows], DECODE_COLOR, "o")
        self._errors(self.throughput, "decode" if inference else "training", sizes, [r.throughput for r in rows],
                     [r.throughput_std for r in rows], DECODE_COLOR)
        models = sorted({r.bound_model for r in rows if r.bound_model})
        bound_name = "bound (planner" + (f", {' / '.join(models)})" if models else ")")
        self._curve(self.throughput, bound_name, sizes, [r.decode_bound_tps for r in rows], BOUND_COLOR,
                    "t", dashed=True)
        if bound_name in self.curves:  # one key whatever the split, for whoever looks the curve up
            self.curves["bound (planner)"] = self.curves[bound_name]
        self.prefill.setVisible(inference)
        if inference:
            self._curve(self.prefill, "prefill", sizes, [r.prefill_tps for r in rows], PREFILL_COLOR, "s")
            self._errors(self.prefill, "prefill", sizes, [r.prefill_tps for r in rows], [r.prefill_std for r in rows],
                         PREFILL_COLOR)
        self._curve(self.speedup, "ideal (N×)", sizes, sizes, IDEAL_COLOR, None, dashed=True)
        self._curve(self.speedup, "decode speed-up" if inference else "speed-up", sizes,
                    [r.speedup for r in rows], DECODE_COLOR, "o")
        if inference:
            self._curve(self.speedup, "prefill speed-up", sizes, [r.prefill_speedup for r in rows],
                        PREFILL_COLOR, "s")
        for plot in (self.throughput, self.prefill, self.speedup):
            plot.getAxis("bottom").setTicks([[(s, f"{s:g}") for s in sizes]])

    def _curve(self, plot: pg.PlotItem, name: str, xs: list[float], ys: list[float | None], color: str,
               symbol: str | None, dashed: bool = False) -> None:
        points = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
        if not points:
            return
        style = Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine
        curve = plot.plot([p[0] for p in points], [p[1] for p in points], name=name,
                          pen=pg.mkPen(color, width=2, style=style), symbol=symbol, symbolBrush=color,
                          symbolPen=color, symbolSize=8)
        self.curves[name] = curve

    def _errors(self, plot: pg.PlotItem, name: str, xs: list[float], ys: list[float | None],
                stds: list[float | None], color: str) -> None:
        """± one std over the runs at each size, where the runs gave one."""
        points = [(x, y, e) for x, y, e in zip(xs, ys, stds, strict=True) if y is not None and e]
        if not points:
            return
        x, y, height = (np.array(values, dtype=float) for values in zip(*points))
        bars = pg.ErrorBarItem(x=x, y=y, height=2 * height, beam=0.15, pen=pg.mkPen(color, width=1.5))
        plot.addItem(bars)
        self.error_bars[name] = bars

    def image(self) -> QImage:
        """The chart as an image (pyqtgraph's ImageExporter), for a PNG file."""
        exporter = ImageExporter(self.ci)
        exporter.parameters()["width"] = EXPORT_WIDTH
        return exporter.export(toBytes=True)
