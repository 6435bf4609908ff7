"""One dashboard plot: a wall-clock time axis, one curve per (node, series), a hover line.

Each curve is handed only its window's points, peak-decimated here to
each pixel column's min and max (``core.telemetry.decimate``, vectorised
numpy): a 10-minute window of 10 Hz samples costs about two points per pixel
column and no spike is lost. pyqtgraph's own downsampling and clip-to-view
stay off: they redid that work in Python on every update and again on every
X range change (the dashboard's largest stall, measured in
tests/perf/test_gui_stalls.py).
Bins are fixed in absolute time, so a bin
that is over never changes: each curve keeps its finished bins
(``_Decimated``) and a frame decimates only the points since the last one,
until the window, the plot's width or the model's layout changes. The Y range is set here, from 0 to just above the largest visible value,
and only moved when that changes by a noticeable step: pyqtgraph's own
auto-range would rescan every curve on every update. A draw costs one paint.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from PySide6.QtWidgets import QGraphicsItem, QWidget

import pyqtgraph as pg
from sparksync.core.telemetry import DashboardModel
from sparksync.core.telemetry import peak_decimate
from sparksync.core.base import MemoryUnit
from sparksync.gui.dashboard.palette import BACKGROUND, FOREGROUND
from sparksync.gui.dashboard.plot_specs import PlotSpec, memory_scale
from sparksync.gui.dashboard.time_axis import TimeAxis

CurveKey = tuple[str, str]  # (node, series name)
HEADROOM = 1.1  # the top of the Y axis, over the largest visible value
SHRINK_BELOW = 0.6  # the Y axis only shrinks when the data fell below this share of it
GAP_COLOUR, GAP_EDGE = (230, 126, 34, 45), (230, 126, 34, 160)  # an orange wash: no data here, and why


@dataclass
class _Decimated:
    """A curve's finished bins (x, y, unscaled) for one bin width; bins from ``edge`` on are still open."""

    bin_s: float
    token: int  # the model's layout_version when made: a gap, a history merge or a new series remakes it
    x: np.ndarray
    y: np.ndarray
    edge: float

    def extend(self, x: np.ndarray, y: np.ndarray, t0: float) -> tuple[np.ndarray, np.ndarray]:
        """Add the points from ``edge`` on; returns what to draw from ``t0``: the finished bins, then the open."""
        new_x, new_y = peak_decimate(x, y, self.bin_s)
        if len(x):
            edge = math.floor(x[-1] / self.bin_s) * self.bin_s
            done = int(np.searchsorted(new_x, edge))
            self.x, self.y = np.concatenate([self.x, new_x[:done]]), np.concatenate([self.y, new_y[:done]])
            self.edge = max(self.edge, edge)
            new_x, new_y = new_x[done:], new_y[done:]
        start = int(np.searchsorted(self.x, t0))
        if start:
            self.x, self.y = self.x[start:], self.y[start:]
        return np.concatenate([self.x, new_x]), np.concatenate([self.y, new_y])


class Curve(pg.PlotCurveItem):
    """A bare curve: the dashboard hands it finished points, so PlotDataItem's wrapping (its own
    downsampling, clipping, symbols and a second item) is work for nothing on every update."""

    def getOriginalDataset(self):  # noqa: N802 - named as PlotDataItem names it
        """The points the dashboard handed over (already decimated)."""
        return self.getData()


class DashboardPlot(pg.PlotWidget):
    def __init__(self, spec: PlotSpec, memory_unit: MemoryUnit, parent: QWidget | None = None):
        super().__init__(parent, background=BACKGROUND, axisItems={"bottom": TimeAxis()})
        self.spec = spec
        self.setObjectName(f"plot_{spec.key}")
        self.curves: dict[CurveKey, pg.PlotCurveItem] = {}
        self._decimated: dict[CurveKey, _Decimated] = {}
        self._scale = 1.0
        self._top = 0.0
        self._title = ""
        item = self.getPlotItem()
        item.showGrid(x=True, y=True, alpha=0.25)
        item.hideButtons()
        item.setMenuEnabled(False)
        self.view_box = item.getViewBox()
        self.view_box.setMouseEnabled(x=True, y=False)
        self.view_box.disableAutoRange()
        self.crosshair = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#888888", width=1))
        self.crosshair.hide()
        item.addItem(self.crosshair, ignoreBounds=True)
        for side in ("left", "bottom"):
            axis = item.getAxis(side)
            axis.setTextPen(FOREGROUND)
            # Axis text is slow to draw; cache it so a curve update does not redraw a left axis
            # whose ticks did not move (the cache is dropped whenever the axis itself changes).
            axis.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        item.titleLabel.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        for side in ("top", "right"):
            # Hidden, yet linked: each X range change would rebuild the top axis' label text.
            item.getAxis(side).unlinkFromView()
        self.gaps: list[pg.LinearRegionItem] = []
        self.placeholder = pg.TextItem("", color="#8a9099", anchor=(0.5, 0.5))
        item.addItem(self.placeholder, ignoreBounds=True)
        # One entry per node (its colour); the title names the line styles. Cached: it rarely changes.
        self.legend = item.addLegend(offset=(6, 4), labelTextColor=FOREGROUND, labelTextSize="8pt",
                                     brush=pg.mkBrush(16, 20, 24, 190), verSpacing=-6)
        self.legend.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.legend_names: list[str] = []
        self.set_memory_unit(memory_unit)
        self.set_title(spec.title)
        if spec.y_range is not None:
            self.setYRange(*spec.y_range, padding=0)

    # --- labels -----------------------------------------------------------------

    def set_memory_unit(self, unit: MemoryUnit) -> None:
        spec = self.spec
        self._scale = memory_scale(spec.key, unit)
        axis = self.getPlotItem().getAxis("left")
        axis.enableAutoSIPrefix(spec.si_prefix)
        unit_text = unit.value if spec.unit in ("GB", "GiB") else spec.unit
        self.getPlotItem().setLabel("left", spec.axis, units=unit_text, color=FOREGROUND)
        self._top = 0.0  # numbers change with the unit: fit the axis again

    def axis_label(self) -> str:
        """The left axis' text as shown, unit included (e.g. 'link rate (Gb/s)')."""
        axis = self.getPlotItem().getAxis("left")
        return f"{axis.labelText} ({axis.labelUnitPrefix}{axis.labelUnits})"

    def set_title(self, text: str) -> None:
        if text != self._title:  # a new title re-lays the plot out; skip when nothing changed
            self._title = text
            self.getPlotItem().setTitle(text, color=FOREGROUND, size="9pt")

    def title(self) -> str:
        return self._title

    def set_placeholder(self, text: str) -> None:
        """A line in the middle of the plot while it has no curve (e.g. no workload yet)."""
        self.placeholder.setText(text)
        self.placeholder.setVisible(bool(text) and not self.curves)

    def mark_gap(self, start: float, end: float, text: str) -> None:
        """Shade the time a node sent nothing (its agent restarted, say), with ``text`` as the tooltip."""
        region = pg.LinearRegionItem(
            (start, end), movable=False, brush=pg.mkBrush(GAP_COLOUR), pen=pg.mkPen(GAP_EDGE, width=1)
        )
        region.setToolTip(text)
        region.setZValue(-10)  # under the curves
        self.getPlotItem().addItem(region, ignoreBounds=True)
        self.gaps.append(region)

    # --- curves -------------------------------------------------------------------

    def set_tick_width(self, width: float | None) -> None:
        """Choose the time ticks as for a plot ``width`` pixels wide, so every plot shows the same ticks."""
        self.getPlotItem().getAxis("bottom").set_tick_width(width)

    def add_legend_entry(self, label: str, pen) -> None:
        """A legend line for ``label`` (a node) in its colour, once."""
        if label in self.legend_names:
            return
        self.legend_names.append(label)
        self.legend.addItem(pg.PlotDataItem(pen=pen), label)

    def add_curve(self, key: CurveKey, pen) -> pg.PlotCurveItem:
        curve = Curve(pen=pen, connect="finite")
        self.getPlotItem().addItem(curve)
        self.curves[key] = curve
        self.placeholder.hide()
        return curve

    def draw(self, model: DashboardModel, t0: float, t1: float, shown: Callable[[str, str], bool]) -> int:
        """Show the window [t0, t1] of every shown curve; returns the points handed to the plot."""
        self.setXRange(t0, t1, padding=0)
        if self.placeholder.isVisible():
            self.placeholder.setPos((t0 + t1) / 2, self._top / 2 if self._top else 0.5)
        points, top = 0, 0.0
        width = self.view_box.width()
        bin_s = (t1 - t0) / width if width > 0 and t1 > t0 else 0.0  # one pixel column of time
        for (node, name), curve in self.curves.items():
            visible = shown(node, name)
            if visible != curve.isVisible():  # each Qt call costs; most draws change nothing here
                curve.setVisible(visible)
            if not visible:
                continue
            x, y = self._points(model, (node, name), t0, bin_s)
            if self._scale != 1.0:
                y = y / self._scale
            curve.setData(x, y)
            points += len(x)
            if not name.startswith(self.spec.fit_ignores):
                top = max(top, _finite_max(y))
        self._fit_y(top)
        # Move the view now rather than from inside the paint, where pyqtgraph would move it and
        # thereby ask for a second paint of the same plot (every draw would be painted twice).
        self.view_box.prepareForPaint()
        return points

    def _points(self, model: DashboardModel, key: CurveKey, t0: float, bin_s: float) -> tuple[np.ndarray, np.ndarray]:
        """The curve's points from ``t0``, decimated; only the points since its last frame are decimated anew."""
        cache = self._decimated.get(key)
        if cache is None or cache.bin_s != bin_s or cache.token != model.layout_version or cache.edge < t0:
            if bin_s <= 0:
                return model.window(*key, t0)
            empty = np.empty(0)
            cache = self._decimated[key] = _Decimated(bin_s, model.layout_version, empty, empty, t0)
            return cache.extend(*model.window(*key, t0), t0)
        return cache.extend(*model.window(*key, cache.edge), t0)

    def _fit_y(self, top: float) -> None:
        if self.spec.y_range is not None:
            return
        wanted = top * HEADROOM if top > 0 else 1.0
        if wanted > self._top or wanted < self._top * SHRINK_BELOW:
            self._top = wanted
            self.setYRange(0, wanted, padding=0)


def _finite_max(values: np.ndarray) -> float:
    if not len(values):
        return 0.0
    top = np.nanmax(values) if not np.isnan(values).all() else 0.0
    return float(top)
