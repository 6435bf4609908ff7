"""Hover for values: a vertical line across every plot and a label with the figures under the mouse.

The mouse position is rate-limited (pyqtgraph's SignalProxy) so a fast
mouse never floods the GUI thread; the label lists the shown curves of the
plot under the mouse, each with its value nearest that time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

if TYPE_CHECKING:  # pyqtgraph is imported once the plots are built, not with the window
    import pyqtgraph as pg

    from sparksync.gui.dashboard.dashboard_plot import DashboardPlot

MOUSE_RATE_HZ = 30
MAX_LINES = 8
IDLE_TEXT = "Hover over a plot for values"

# (plot, time) -> one line per curve, e.g. "spark-1 memory used: 42.1 GB"
Describe = Callable[["DashboardPlot", float], list[str]]


class HoverReadout(QLabel):
    def __init__(self, describe: Describe, parent: QWidget | None = None):
        super().__init__(IDLE_TEXT, parent)
        self.setObjectName("hoverReadout")
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setStyleSheet("color: palette(window-text); font-family: monospace;")
        self._describe = describe
        self._plots: list[DashboardPlot] = []
        self._proxies: list[pg.SignalProxy] = []

    def attach(self, plot: DashboardPlot) -> None:
        import pyqtgraph as pg

        self._plots.append(plot)
        proxy = pg.SignalProxy(
            plot.scene().sigMouseMoved, rateLimit=MOUSE_RATE_HZ, slot=self._on_mouse_moved(plot)
        )
        self._proxies.append(proxy)

    def show_at(self, plot: DashboardPlot, t: float) -> None:
        """Put the line at time ``t`` in every plot and list ``plot``'s values there."""
        for each in self._plots:
            each.crosshair.setPos(t)
            each.crosshair.show()
        lines = self._describe(plot, t)
        clock = time.strftime("%H:%M:%S", time.localtime(t))
        shown = lines[:MAX_LINES] + (
            [f"… and {len(lines) - MAX_LINES} more"] if len(lines) > MAX_LINES else []
        )
        self.setText(f"{clock}   " + "   ".join(shown) if shown else f"{clock}   (no data here)")
        self.setToolTip("\n".join(lines))

    def clear_readout(self) -> None:
        for each in self._plots:
            each.crosshair.hide()
        self.setText(IDLE_TEXT)
        self.setToolTip("")

    def _on_mouse_moved(self, plot: DashboardPlot):
        def moved(args) -> None:
            position = args[0]
            view = plot.view_box
            if not view.sceneBoundingRect().contains(position):
                self.clear_readout()
                return
            self.show_at(plot, view.mapSceneToView(position).x())

        return moved
