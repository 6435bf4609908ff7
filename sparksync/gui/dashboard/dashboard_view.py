"""The cluster dashboard: every node's series in plots that share one wall-clock time axis.

Samples land in the Qt-free :class:`DashboardModel` as they arrive. A timer
ticking at ``REDRAW_HZ`` redraws, and only when the model changed:

- a *frame* is the window [latest - window, latest] at one moment; frames
  come no faster than the plots can show a change (about one pixel of time,
  never more than 30 a second);
- each tick redraws at most one plot of the frame, so the GUI thread never
  spends more than one plot's work at a time and the event loop stays
  responsive however many nodes stream;
- nothing is redrawn while the plots cannot be seen (another tab is current,
  the window is hidden in the tray or minimised): the buffers keep filling, and
  the moment the dashboard shows again every plot is brought up to date at once.

The plots follow the same time range. Zooming or panning one (mouse wheel,
drag) applies to all and pauses the live view; Pause freezes it while the
buffers keep filling, and Resume jumps back to live.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.telemetry import (
    CLUSTER,
    CLUSTER_LABEL,
    KINDS,
    MEMORY_TOTAL,
    TOKENS_TOTAL,
    DashboardModel,
    kind_of,
    plot_of,
    split_name,
)
from sparksync.core.base import DEFAULT_MEMORY_UNIT, MemoryUnit, format_bytes, format_memory, format_value
from sparksync.gui.dashboard.background import BackgroundJobs
from sparksync.gui.dashboard.hover_readout import HoverReadout
from sparksync.gui.dashboard.palette import CLUSTER_COLOUR, node_colour, pen, shade
from sparksync.gui.dashboard.plot_specs import ORDER, plot_specs, utilisation_title
from sparksync.gui.dashboard.series_toggles import SeriesToggles
from sparksync.gui.dashboard.window_picker import DEFAULT_WINDOW_S, WindowPicker

if TYPE_CHECKING:  # pyqtgraph (under DashboardPlot) is imported when the plots are built
    from sparksync.gui.dashboard.dashboard_plot import DashboardPlot

REDRAW_HZ = 30
MAX_FRAME_INTERVAL_S = 0.5  # even a 1-hour view shows new data within half a second
COLUMNS = 2
HOVER_TOLERANCE_S = 5.0
MIN_SPAN_S = 10.0  # the narrowest time range shown, while the first samples arrive  # a value further than this from the mouse is not "there"


class DashboardView(QWidget):
    plot_drawn = Signal(str, int)  # plot key, points handed to it
    frame_drawn = Signal()  # every plot of a frame is redrawn
    status_message = Signal(str)  # news for the window's status bar
    memory_unit_changed = Signal(object)  # MemoryUnit: other views name memory the same way
    error_raised = Signal(str)
    plots_shown = Signal()  # every plot on screen has painted once since they were built

    def __init__(
        self,
        model: DashboardModel,
        parent: QWidget | None = None,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        memory_unit: MemoryUnit = DEFAULT_MEMORY_UNIT,
        plots_later: bool = False,
    ):
        """``plots_later``: build the plots only once the dashboard has painted.

        The plots are pyqtgraph's, whose import and eight plots cost the app's
        start more than the rest of its first screen; built later, the window
        shows at once (node cards, controls) and the plots follow a moment after,
        before any sample could fill them.
        """
        super().__init__(parent)
        self.model = model
        self.window_s = window_s
        self.memory_unit = memory_unit
        self.specs = plot_specs(memory_unit)
        self.ticks = 0  # timer ticks seen, drawn or not (lets tests wait without sleeping)
        self._paused = False
        self._seen_version = -1
        self._seen_layout = -1
        self._frame: tuple[float, float] | None = None  # the range on screen
        self._pending: list[str] = []  # plots still to redraw in this frame
        self._last_frame_at = -math.inf
        self._colours: dict[str, object] = {}
        self._instances: dict[tuple[str, str], list[str]] = {}  # (node, kind) -> instances in order
        self._gaps_shown = 0  # the model's gaps already marked on the plots
        self.jobs = BackgroundJobs(self)
        self.jobs.succeeded.connect(self.status_message)
        self.jobs.failed.connect(self.error_raised)
        self._plots: dict[str, DashboardPlot] | None = None
        self._plots_later = plots_later
        self._unpainted: set[QObject] = set()
        self._build()
        self._timer = QTimer(self)
        self._timer.setInterval(int(1000 / REDRAW_HZ))
        self._timer.timeout.connect(self._on_timer_timeout)
        if not plots_later:
            self.build_plots()

    # --- layout -------------------------------------------------------------------

    def _build(self) -> None:
        self.toggles = SeriesToggles(self)
        self.toggles.changed.connect(self._on_toggles_changed)
        self.readout = HoverReadout(self._describe, self)
        self.readout.setWordWrap(True)
        self.plots_area = QWidget(self)
        self.plots_area.setObjectName("plotsArea")
        self._grid = QGridLayout(self.plots_area)
        self._grid.setContentsMargins(0, 0, 0, 0)
        self._grid.setSpacing(4)
        for column in range(COLUMNS):
            self._grid.setColumnStretch(column, 1)
        self._loading = QLabel("Preparing the plots…", self.plots_area)
        self._loading.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._grid.addWidget(self._loading, 0, 0, 1, COLUMNS)
        self.side_panel = self._side_panel()
        right = self._right = QVBoxLayout()
        right.addLayout(self._controls())
        right.addWidget(self.readout)
        right.addWidget(self.plots_area, stretch=1)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.side_panel)
        layout.addLayout(right, stretch=1)

    @property
    def plots_ready(self) -> bool:
        return self._plots is not None

    @property
    def plots(self) -> dict[str, DashboardPlot]:
        """The plots by key (built now if they were left for after the first paint)."""
        if self._plots is None:
            self.build_plots()
        assert self._plots is not None
        return self._plots

    def build_plots(self) -> None:
        """Make the plots, lay them out and start redrawing (once; later calls do nothing)."""
        if self._plots is not None:
            return
        from sparksync.gui.dashboard.dashboard_plot import DashboardPlot

        self._plots = {}
        for key in ORDER:
            plot = DashboardPlot(self.specs[key], self.memory_unit, self.plots_area)
            plot.view_box.sigRangeChangedManually.connect(self._on_plot_range_changed_manually(plot))
            plot.view_box.sigResized.connect(self._on_view_box_resized)  # every plot's ticks as the narrowest's
            self.readout.attach(plot)
            self._plots[key] = plot
            plot.set_placeholder(self.specs[key].placeholder)
        self._grid.removeWidget(self._loading)
        self._loading.deleteLater()
        self._reflow()
        self._invalidate()  # samples that came meanwhile are drawn on the first tick
        self._timer.start()
        self._unpainted = {plot.viewport() for plot in self._plots.values() if not plot.isHidden()}
        for viewport in self._unpainted:  # a plot is a QGraphicsView: its viewport is what paints
            viewport.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QEvent.Type.Paint and watched in self._unpainted:
            watched.removeEventFilter(self)
            self._unpainted.discard(watched)
            if not self._unpainted:
                QTimer.singleShot(0, self.plots_shown.emit)  # after this paint pass, not inside it
        return False

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().paintEvent(event)
        if self._plots is None and self._plots_later:
            self._plots_later = False  # ask once
            QTimer.singleShot(0, self.build_plots)  # after this paint pass, not inside it

    def _side_panel(self) -> QScrollArea:
        inner = QWidget()
        self.side_layout = QVBoxLayout(inner)
        self.side_layout.setContentsMargins(0, 0, 4, 0)
        self.side_layout.addWidget(self.toggles)
        scroll = QScrollArea(self)
        scroll.setObjectName("sidePanel")
        scroll.setWidget(inner)
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setFixedWidth(270)
        return scroll

    def add_side_widget(self, widget: QWidget, index: int = 0) -> None:
        """Put a widget (e.g. a node card) in the side panel, above the toggles by default."""
        self.side_layout.insertWidget(index, widget)

    def add_banner(self, widget: QWidget) -> None:
        """Put a strip (e.g. "Run a model on this computer") above the plots' controls."""
        self._right.insertWidget(0, widget)

    def _controls(self) -> QHBoxLayout:
        bar = QHBoxLayout()
        self.window_picker = WindowPicker(self, self.window_s)
        self.window_picker.window_changed.connect(self._on_window_picker_window_changed)
        self.pause_button = QPushButton("Pause", self)
        self.pause_button.setObjectName("pauseButton")
        self.pause_button.setCheckable(True)
        self.pause_button.setToolTip("Freeze the plots; data keeps arriving and shows on Resume")
        self.pause_button.toggled.connect(self._on_pause_button_toggled)
        self.unit_box = QComboBox(self)
        self.unit_box.setObjectName("memoryUnit")
        for unit in MemoryUnit:
            self.unit_box.addItem(unit.explained)
        self.unit_box.setCurrentIndex(list(MemoryUnit).index(self.memory_unit))
        self.unit_box.currentIndexChanged.connect(self._on_unit_box_changed)
        csv_button = QPushButton("Export CSV…", self)
        csv_button.clicked.connect(self._on_csv_button_clicked)
        png_button = QPushButton("Export PNG…", self)
        png_button.clicked.connect(self._on_png_button_clicked)
        for widget in (self.window_picker, self.pause_button, QLabel("Memory in:"), self.unit_box):
            bar.addWidget(widget)
        bar.addStretch(1)
        bar.addWidget(csv_button)
        bar.addWidget(png_button)
        return bar

    def _has_place(self, key: str) -> bool:
        """Whether a plot is on screen: it has curves, or stands as a placeholder until it does."""
        return bool(self.plots[key].curves) or self.specs[key].always

    def _reflow(self) -> None:
        """Lay the plots that have something to show out in a grid, in their fixed order."""
        shown = [key for key in ORDER if self._has_place(key)]
        for key, plot in self.plots.items():
            self._grid.removeWidget(plot)
            plot.setVisible(key in shown)
        for i, key in enumerate(shown):
            alone = i == len(shown) - 1 and i % COLUMNS == 0  # the last row's only plot takes the row
            self._grid.addWidget(self.plots[key], i // COLUMNS, i % COLUMNS, 1, COLUMNS if alone else 1)
        rows = (len(shown) + COLUMNS - 1) // COLUMNS
        for row in range(self._grid.rowCount()):
            self._grid.setRowStretch(row, 1 if row < rows else 0)

    # --- state the controls change ----------------------------------------------------

    @property
    def paused(self) -> bool:
        return self._paused

    def set_paused(self, paused: bool) -> None:
        self.pause_button.setChecked(paused)

    def set_window(self, seconds: float) -> None:
        self.window_picker.set_window(seconds)

    def set_memory_unit(self, unit: MemoryUnit) -> None:
        self.unit_box.setCurrentIndex(list(MemoryUnit).index(unit))

    def shown(self, node: str, name: str) -> bool:
        return self.toggles.is_shown(node, name)

    def visible_range(self) -> tuple[float, float] | None:
        """The time range on screen (the frozen one while paused)."""
        return self._frame

    def curve(self, node: str, name: str):
        return self.plots[plot_of(node, name)].curves.get((node, name))

    def _on_window_picker_window_changed(self, seconds: float) -> None:
        self.window_s = seconds
        self._invalidate()
        if self._paused:
            self.set_paused(False)  # picking a window means "show me the latest"

    def _on_pause_button_toggled(self, paused: bool) -> None:
        self._paused = paused
        self.pause_button.setText("Resume" if paused else "Pause")
        if not paused:
            self._invalidate()

    def _on_unit_box_changed(self, index: int) -> None:
        self.memory_unit = list(MemoryUnit)[index]
        for plot in self.plots.values():
            plot.set_memory_unit(self.memory_unit)
        self.memory_unit_changed.emit(self.memory_unit)
        self._invalidate()
        self._redraw_all_now()

    def _on_toggles_changed(self) -> None:
        self._invalidate()
        if self._paused:
            self._redraw_all_now()  # a toggle must take effect even on a frozen view

    def _on_plot_range_changed_manually(self, source: DashboardPlot):
        def changed(*_) -> None:
            t0, t1 = source.view_box.viewRange()[0]
            self.set_paused(True)
            self._frame = (t0, t1)
            self._redraw_all_now()

        return changed

    def _invalidate(self) -> None:
        self._seen_version = -1
        self._last_frame_at = -math.inf

    # --- drawing --------------------------------------------------------------------

    def on_screen(self) -> bool:
        """Whether the plots can be seen: shown, on the current tab, in a window that is not minimised."""
        return self.isVisible() and not self.window().isMinimized()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        # Back on screen: draw the whole frame before the first paint, not one plot per tick,
        # so no plot is seen stale while the others catch up.
        if self._paused or self._plots is None:
            return
        if self.model.version != self._seen_version:
            self._start_frame()
        if self._pending:
            for key in self._pending:
                self._draw_plot(key)
            self._pending = []
            self.frame_drawn.emit()

    def _on_view_box_resized(self, *_args) -> None:
        width = self._narrowest_plot()
        for plot in self.plots.values():
            plot.set_tick_width(width)

    def _on_timer_timeout(self) -> None:
        self.ticks += 1
        if self._paused or not self.on_screen():
            return
        if not self._pending and self.model.version != self._seen_version and self._frame_due():
            self._start_frame()
        if self._pending:
            self._draw_plot(self._pending.pop(0))
            if not self._pending:
                self.frame_drawn.emit()

    def _frame_due(self) -> bool:
        # One frame per pixel's worth of time at most: a 10-minute window moves 1 px every ~1 s.
        width = max(self.plots["memory"].width(), 100)
        span = self._frame[1] - self._frame[0] if self._frame is not None else MIN_SPAN_S
        interval = min(max(span / width, 1.0 / REDRAW_HZ), MAX_FRAME_INTERVAL_S)
        return time.monotonic() - self._last_frame_at >= interval

    def _start_frame(self) -> None:
        if not math.isfinite(self.model.latest_ts):
            return
        self._seen_version = self.model.version
        self._last_frame_at = time.monotonic()
        self._sync_layout()
        t1 = self.model.latest_ts
        # Until the data fills the window, stretch what there is across the plots (at least
        # MIN_SPAN_S): a newcomer sees lines at once rather than a sliver at the right edge.
        t0 = max(t1 - self.window_s, min(self.model.earliest_ts, t1 - MIN_SPAN_S))
        self._frame = (t0, t1)
        self._pending = [key for key in ORDER if self._has_place(key)]

    def _narrowest_plot(self) -> float | None:
        """The width every plot's time ticks are chosen for: the narrowest shown plot's."""
        widths = [p.view_box.width() for k, p in self.plots.items() if self._has_place(k) and p.view_box.width() > 0]
        return min(widths) if widths else None

    def _redraw_all_now(self) -> None:
        """Redraw every plot at once (a user action on a frozen view; not the live path)."""
        self._sync_layout()
        if self._frame is None:
            return
        self._pending = []
        for key in ORDER:
            if self._has_place(key):
                self._draw_plot(key)
        self.frame_drawn.emit()

    def _draw_plot(self, key: str) -> None:
        plot = self.plots[key]
        t0, t1 = self._frame
        plot.set_tick_width(self._narrowest_plot())  # the layout may have moved since the last frame
        points = plot.draw(self.model, t0, t1, self.shown)
        if key == "cluster_memory":
            plot.set_title(self._cluster_title())
        elif key == "memory":
            plot.set_title(self._memory_title())
        elif key == "utilisation":
            plot.set_title(utilisation_title(any(n[1].startswith("gpu.util") for n in plot.curves)))
        self.plot_drawn.emit(key, points)

    def _memory_title(self) -> str:
        """Each node's used memory; the totals (the dashed lines, above the axis while far) in words."""
        totals = sorted({t for n in self.model.nodes if (t := self.model.latest(n, MEMORY_TOTAL)) is not None})
        title = self.specs["memory"].title
        if not totals:
            return title
        low, high = format_bytes(totals[0], self.memory_unit), format_bytes(totals[-1], self.memory_unit)
        return f"{title}, of {low}" + ("" if low == high else f" to {high}") + " (total dashed)"

    def _cluster_title(self) -> str:
        used, capacity = self.model.used_bytes(), self.model.capacity_bytes()
        if used is None or capacity is None:
            return self.specs["cluster_memory"].title
        return f"Cluster memory: {format_memory(used, self.memory_unit)} used of {format_bytes(capacity, self.memory_unit)}"

    # --- curves for new nodes and series --------------------------------------------------

    def _sync_layout(self) -> None:
        if self.model.layout_version == self._seen_layout:
            return
        self._seen_layout = self.model.layout_version
        added = False
        for node in [*self.model.nodes, CLUSTER]:
            if node != CLUSTER or self.model.has(CLUSTER):
                self._ensure_node(node)
            for name in self.model.names(node):
                added |= self._ensure_curve(node, name)
        if added:
            self._reflow()
        self._mark_gaps()

    def _mark_gaps(self) -> None:
        """Shade each new gap (an agent restart, lost samples) on every plot, the reason as its tooltip."""
        new = min(self.model.gaps_marked - self._gaps_shown, len(self.model.gaps))
        for gap in self.model.gaps[len(self.model.gaps) - new :] if new > 0 else []:
            for plot in self.plots.values():
                plot.mark_gap(gap.start, gap.end, f"{gap.node}: {gap.reason}")
        self._gaps_shown = self.model.gaps_marked

    def _ensure_node(self, node: str) -> None:
        if node not in self._colours:
            nodes_so_far = sum(1 for n in self._colours if n != CLUSTER)
            colour = node_colour(nodes_so_far) if node != CLUSTER else QColor(CLUSTER_COLOUR)
            self._colours[node] = colour
            self.toggles.add_node(node, CLUSTER_LABEL if node == CLUSTER else node, colour)

    def _ensure_curve(self, node: str, name: str) -> bool:
        plot = self.plots[plot_of(node, name)]
        if (node, name) in plot.curves:
            return False
        kind, instance = split_name(name)
        self.toggles.add_kind(kind)
        colour = self._curve_colour(node, kind, instance)
        plot.add_curve((node, name), pen(colour, KINDS[kind].style))
        if kind == "tok.workload":  # the workloads share the cluster's curves: each names itself
            plot.add_legend_entry(instance or name, pen(colour, "solid"))
        elif kind == TOKENS_TOTAL:
            plot.add_legend_entry("all workloads", pen(colour, KINDS[kind].style))
        else:
            plot.add_legend_entry(CLUSTER_LABEL if node == CLUSTER else node, pen(self._colours[node], "solid"))
        return True

    def _curve_colour(self, node: str, kind: str, instance: str | None):
        colour = self._colours[node]
        if instance is None:
            return colour
        if node == CLUSTER and kind == "tok.workload":  # workloads share the cluster: a colour each
            seen = self._instances.setdefault((node, kind), [])
            seen.append(instance)
            return node_colour(len(seen) - 1)
        seen = self._instances.setdefault((node, kind.split(".")[0]), [])
        if instance not in seen:
            seen.append(instance)
        return shade(colour, seen.index(instance))

    # --- hover ---------------------------------------------------------------------

    def _describe(self, plot: DashboardPlot, t: float) -> list[str]:
        if self._frame is None:
            return []
        lines = []
        for (node, name), curve in plot.curves.items():
            if not curve.isVisible():
                continue
            x, y = self.model.window(node, name, t - HOVER_TOLERANCE_S)
            if not len(x):
                continue
            i = min(int(abs(x - t).argmin()), len(x) - 1)
            if abs(x[i] - t) <= HOVER_TOLERANCE_S and math.isfinite(y[i]):
                lines.append(
                    f"{self._curve_label(node, name)}: {format_value(y[i], kind_of(name).unit, self.memory_unit)}"
                )
        return lines

    @staticmethod
    def _curve_label(node: str, name: str) -> str:
        kind, instance = split_name(name)
        who = CLUSTER_LABEL if node == CLUSTER else node
        return f"{who} {KINDS[kind].label}" + (f" {instance}" if instance else "")

    # --- export ------------------------------------------------------------------------

    def export_csv_to(self, path: Path) -> bool:
        """Write the shown series of the visible range to ``path`` (in a worker); False when nothing is shown."""
        if self._frame is None:
            self.error_raised.emit("Nothing to export yet: wait for the first data to arrive.")
            return False
        t0, t1 = self._frame
        # Here, not at the top: the export pulls numpy, which the first paint does without.
        from sparksync.core.telemetry import export_csv, visible_data

        data = visible_data(self.model, t0, t1, self.shown)  # copies, so the buffers can move on
        self.jobs.run("CSV export", lambda: f"Exported {export_csv(data, Path(path))} points to {path}")
        return True

    def export_png_to(self, path: Path) -> bool:
        """Save a picture of the plots to ``path`` (rendered here, written in a worker)."""
        image = self.plots_area.grab().toImage()  # rendering must happen on the GUI thread

        def save() -> str:
            if not image.save(str(path), "PNG"):
                raise OSError(f"could not write {path}")
            return f"Saved the plots to {path}"

        self.jobs.run("PNG export", save)
        return True

    def _on_csv_button_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Export the visible data", "sparksync-dashboard.csv", "CSV (*.csv)"
        )
        if path:
            self.export_csv_to(Path(path))

    def _on_png_button_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Save the plots", "sparksync-dashboard.png", "PNG (*.png)"
        )
        if path:
            self.export_png_to(Path(path))
