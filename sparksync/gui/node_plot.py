"""Live plots of one node: unified memory (GB, decimal) and CPU % on a time axis.

Samples go into a Qt-free ring buffer as they arrive; a timer redraws at
most ``REDRAW_HZ`` times a second, and only when something changed, so a
fast agent never makes the GUI thread draw more than the eye can see.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

import pyqtgraph as pg  # after PySide6, so pyqtgraph binds to it
from sparksync.core.series import SeriesBuffer
from sparksync_agent.protocol import Sample

WINDOW_S = 10 * 60  # how much history the plots show
CAPACITY = WINDOW_S * 10  # the agent samples at 10 Hz at most
REDRAW_HZ = 10
COLUMNS = ("t", "mem_used_gb", "mem_total_gb", "cpu_pct")


class NodePlot(QWidget):
    drawn = Signal(int)  # number of points on screen after a redraw

    def __init__(self, parent: QWidget | None = None, window_s: float = WINDOW_S):
        super().__init__(parent)
        self.window_s = window_s
        self.series = SeriesBuffer(CAPACITY, COLUMNS)
        self._drawn_version = self.series.version
        self._memory_top = 0.0
        self._graphics = pg.GraphicsLayoutWidget(self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self._graphics)
        self.memory_plot, self.used_curve, self.total_curve = self._memory_plot()
        self.cpu_plot, self.cpu_curve = self._cpu_plot()
        self.cpu_plot.setXLink(self.memory_plot)
        self._timer = QTimer(self)
        self._timer.setInterval(int(1000 / REDRAW_HZ))
        self._timer.timeout.connect(self._on_timer_timeout)
        self._timer.start()

    def add_sample(self, sample: Sample) -> None:
        if len(self.series) and sample.ts <= self.series.column("t")[-1]:
            return  # time must grow for the window search; a repeat adds nothing
        row = {"t": sample.ts}
        if sample.memory is not None:
            row["mem_used_gb"] = sample.memory.used_bytes / 1e9
            row["mem_total_gb"] = sample.memory.total_bytes / 1e9
        if sample.cpu is not None:
            row["cpu_pct"] = sample.cpu.percent
        self.series.append(row)

    def points_shown(self) -> int:
        x, _ = self.used_curve.getData()
        return 0 if x is None else len(x)

    def _on_timer_timeout(self) -> None:
        if self.series.version == self._drawn_version:
            return
        self._drawn_version = self.series.version
        self._memory_top = 0.0
        if not len(self.series):
            return
        t = self.series.column("t")
        window = self.series.since("t", t[-1] - self.window_s)
        x = t[window]
        for curve, column in (
            (self.used_curve, "mem_used_gb"),
            (self.total_curve, "mem_total_gb"),
            (self.cpu_curve, "cpu_pct"),
        ):
            curve.setData(x, self.series.column(column)[window])
        self._fit_memory_axis(self.series.column("mem_total_gb")[window])
        self.drawn.emit(len(x))

    def _fit_memory_axis(self, totals: np.ndarray) -> None:
        # Memory is read against its total, so the axis runs from 0 to just above it.
        finite = totals[np.isfinite(totals)]
        top = float(finite.max()) * 1.05 if finite.size else 0.0
        if top > 0 and top != self._memory_top:
            self._memory_top = top
            self.memory_plot.setYRange(0, top, padding=0)

    def _memory_plot(self):
        plot = self._graphics.addPlot(row=0, col=0, axisItems={"bottom": pg.DateAxisItem()})
        plot.setTitle("Unified memory")
        plot.setLabel("left", "memory (GB, 10⁹ bytes)")
        plot.showGrid(x=True, y=True, alpha=0.3)
        plot.addLegend(offset=(10, 5))
        plot.setLimits(yMin=0)
        used = plot.plot(name="used", pen=pg.mkPen("#4aa3df", width=2), connect="finite")
        total = plot.plot(name="total", pen=pg.mkPen("#999999", width=1, style=Qt.PenStyle.DashLine), connect="finite")
        return plot, used, total

    def _cpu_plot(self):
        plot = self._graphics.addPlot(row=1, col=0, axisItems={"bottom": pg.DateAxisItem()})
        plot.setTitle("CPU")
        plot.setLabel("left", "CPU (%)")
        plot.setLabel("bottom", "time")
        plot.showGrid(x=True, y=True, alpha=0.3)
        plot.setYRange(0, 100)
        plot.setLimits(yMin=0, yMax=100)
        return plot, plot.plot(pen=pg.mkPen("#e07b39", width=2), connect="finite")
