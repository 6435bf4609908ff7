"""One gateway in the Switchyard section: its traffic split, per-pool figures and a tokens/s plot over time."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from sparksync.gui.dashboard.palette import BACKGROUND, FOREGROUND, node_colour
from sparksync.gui.switchyard.split_bar import SplitBar
from sparksync.switchyard.gateway_watch import GatewayReading
from sparksync.switchyard.live_metrics import GatewayLive, PoolLive


class GatewayPanel(QFrame):
    def __init__(self, key: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.key = key
        self.setObjectName("gatewayPanel")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel(self, objectName="gatewayTitle")
        self.caption = QLabel(self, objectName="splitCaption")
        self.split = SplitBar(self)
        self.figures = QLabel(self, objectName="poolFigures")
        self.problem = QLabel(self, objectName="gatewayProblem", wordWrap=True)
        self.problem.setStyleSheet("color: #c0392b")
        self.problem.hide()
        self.plot = pg.PlotWidget(self, background=BACKGROUND, axisItems={"bottom": pg.DateAxisItem()})
        self.plot.setObjectName("tokensPlot")
        self.plot.setMinimumHeight(140)
        item = self.plot.getPlotItem()
        item.setTitle("Output tokens/s per pool", color=FOREGROUND, size="9pt")
        item.showGrid(x=True, y=True, alpha=0.25)
        item.setMenuEnabled(False)
        item.hideButtons()
        self.legend = item.addLegend(offset=(5, 5))
        self.curves: dict[str, pg.PlotDataItem] = {}
        self._layout()

    def _layout(self) -> None:
        left = QVBoxLayout()
        for widget in (self.title, self.caption, self.split, self.figures, self.problem):
            left.addWidget(widget)
        left.addStretch(1)
        row = QHBoxLayout(self)
        row.addLayout(left, 2)
        row.addWidget(self.plot, 3)

    def show_reading(self, reading: GatewayReading) -> None:
        self.title.setText(f"<b>{reading.label}</b> · {reading.url or 'not reached yet'}")
        self.problem.setVisible(reading.problem is not None)
        self.problem.setText(f"⚠ {reading.problem}" if reading.problem else "")
        if reading.live is not None:
            self._show_live(reading.live)
            self._plot(reading.rates)

    def _show_live(self, live: GatewayLive) -> None:
        pools = list(live.pools.values())
        recent = live.recent_requests > 0
        if recent:
            self.caption.setText(
                f"Traffic split, last {live.window_s:.0f} s ({live.recent_requests} requests)"
            )
            shares = [(p.name, p.recent_share or 0.0, self._colour(p.name)) for p in pools]
        else:
            self.caption.setText(f"Traffic split since the gateway started ({live.requests} requests)")
            shares = [(p.name, p.share, self._colour(p.name)) for p in pools]
        self.split.set_shares(shares)
        self.figures.setText(_figures_table(pools))

    def _colour(self, pool: str):
        if pool not in self.curves:
            colour = node_colour(len(self.curves))
            self.curves[pool] = self.plot.plot([], [], pen=pg.mkPen(colour, width=1), name=pool)
        return self.curves[pool].opts["pen"].color()

    def _plot(self, rates: dict[str, tuple[list[float], list[float]]]) -> None:
        for pool, (times, values) in rates.items():
            self._colour(pool)
            self.curves[pool].setData(times, values)

    def latest_rate(self, pool: str) -> float | None:
        """The last tokens/s drawn for ``pool``."""
        curve = self.curves.get(pool)
        if curve is None or curve.yData is None or not len(curve.yData):
            return None
        return float(curve.yData[-1])


def _figures_table(pools: list[PoolLive]) -> str:
    head = "".join(f"<th align='right'>&nbsp;{h}&nbsp;</th>" for h in
                   ("pool", "requests", "failed", "errors", "TTFT p50", "tok/s", "replicas up"))  # fmt: skip
    rows = []
    for p in pools:
        ttft = (
            "–" if p.ttft_p50_s is None else f"{p.ttft_p50_s * 1000:.0f} ms" + ("" if p.ttft_recent else "*")
        )
        cells = (
            p.name,
            p.requests,
            p.failed,
            p.errors,
            ttft,
            f"{p.tokens_per_s:.1f}",
            f"{p.replicas_up}/{p.replicas}",
        )
        rows.append("<tr>" + "".join(f"<td align='right'>&nbsp;{c}&nbsp;</td>" for c in cells) + "</tr>")
    note = "<br><small>* TTFT p50 since the gateway started (no streams in the last seconds)</small>"
    starred = any(p.ttft_p50_s is not None and not p.ttft_recent for p in pools)
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>" + (note if starred else "")
