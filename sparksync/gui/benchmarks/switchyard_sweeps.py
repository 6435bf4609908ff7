"""The Switchyard tab's sweeps: the stored sweeps, and one sweep's chart and table when selected.

As with the evals, the list reads only the history's plain columns and the
whole report is read when a row is chosen, both in workers. The chart is
``SweepChart``; PNG (the CLI's matplotlib chart) and CSV exports are written
by workers too.
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.bench import HistoryStore
from sparksync.gui.benchmarks.cells import DASH
from sparksync.gui.benchmarks.sweep_chart import SweepChart
from sparksync.gui.workers import Jobs
from sparksync.switchyard.eval import published
from sparksync.switchyard.eval.history import SweepHistory, SweepListItem
from sparksync.switchyard.eval.sweep import SweepReport
from sparksync.switchyard.eval.sweep_chart import write_csv, write_png

LIST_LIMIT = 1000
COLUMNS = ("id", "when (UTC)", "policy", "swept", "cases", "large only", "best at parity")
EMPTY_HINT = (
    "<p>No Switchyard sweeps stored yet. Run one with <code>sparksync switchyard eval --suite bfcl "
    "--sweep large_share=1,1/2,1/4,0</code>: it plays the suite and a throughput load at each split.</p>"
    f"<p>{html.escape(published.reference())}</p>"
)


def list_sweeps(path: Path | None) -> list[SweepListItem]:
    return SweepHistory(HistoryStore(path)).list_sweeps(LIST_LIMIT)


def get_sweep(path: Path | None, sweep_id: int) -> SweepReport:
    return SweepHistory(HistoryStore(path)).get(sweep_id)


class SwitchyardSweeps(QWidget):
    sweeps_loaded = Signal(list)  # SweepListItem
    sweep_shown = Signal(object)  # SweepReport
    exported = Signal(str)  # the written file's path
    error_raised = Signal(str)

    def __init__(self, history_path: Path | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("switchyardSweeps")
        self.history_path = history_path
        self.jobs = Jobs(self)
        self.jobs.error_raised.connect(self.error_raised)
        self.report: SweepReport | None = None
        self.table = _table(self)
        self.table.itemSelectionChanged.connect(self._on_table_item_selection_changed)
        self.chart = SweepChart(self)
        self.details = QTextBrowser(self)
        self.details.setObjectName("sweepDetails")
        self.details.setHtml(EMPTY_HINT)
        self.png_button = _button("Export PNG…", "exportSweepPng", self)
        self.csv_button = _button("Export CSV…", "exportSweepCsv", self)
        self.png_button.clicked.connect(lambda: self._ask_path("PNG image (*.png)", ".png", self.export_png))
        self.csv_button.clicked.connect(lambda: self._ask_path("CSV (*.csv)", ".csv", self.export_csv))
        self._layout()

    def _layout(self) -> None:
        # Above: the list and the chosen sweep's table side by side; below, the whole width: its chart.
        above = QSplitter(Qt.Orientation.Horizontal, self)
        above.addWidget(self.table)
        above.addWidget(self.details)
        above.setSizes([450, 550])
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.png_button)
        buttons.addWidget(self.csv_button)
        below = QWidget(self)
        column = QVBoxLayout(below)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.chart, 1)
        column.addLayout(buttons)
        splitter = QSplitter(Qt.Orientation.Vertical, self)
        splitter.addWidget(above)
        splitter.addWidget(below)
        splitter.setSizes([300, 500])
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(splitter)

    def reload(self) -> None:
        path = self.history_path
        self.jobs.run("Switchyard sweeps", lambda: list_sweeps(path), self._on_sweeps_listed)

    def open_sweep(self, sweep_id: int) -> None:
        path = self.history_path
        self.jobs.run("Switchyard sweep", lambda: get_sweep(path, sweep_id), self._on_sweep_read)

    def wait(self, timeout: float = 30.0) -> bool:
        return self.jobs.wait(timeout)

    def export_png(self, path: Path) -> None:
        report = self.report
        if report is not None:
            self.jobs.run("Sweep chart", lambda: str(write_png(report, path)), self.exported.emit)

    def export_csv(self, path: Path) -> None:
        report = self.report
        if report is not None:
            self.jobs.run("Sweep CSV", lambda: str(write_csv(report, path)), self.exported.emit)

    def _ask_path(self, kind: str, suffix: str, then) -> None:
        chosen, _ = QFileDialog.getSaveFileName(self, "Export the sweep", f"switchyard-sweep{suffix}", kind)
        if chosen:
            then(Path(chosen))

    def _on_sweeps_listed(self, items: list[SweepListItem]) -> None:
        self.table.setRowCount(len(items))
        for row, item in enumerate(items):
            for col, text in enumerate(_cells(item)):
                cell = QTableWidgetItem(text)
                cell.setData(Qt.ItemDataRole.UserRole, item.id)
                self.table.setItem(row, col, cell)
        self.table.resizeColumnsToContents()
        if not items:
            self.details.setHtml(EMPTY_HINT)
        self.sweeps_loaded.emit(items)

    def _on_table_item_selection_changed(self) -> None:
        rows = {index.row() for index in self.table.selectionModel().selectedRows()}
        item = self.table.item(rows.pop(), 0) if len(rows) == 1 else None
        if item is not None:
            self.open_sweep(item.data(Qt.ItemDataRole.UserRole))

    def _on_sweep_read(self, report: SweepReport) -> None:
        self.report = report
        self.chart.show_report(report)
        self.details.setHtml(sweep_html(report))
        self.png_button.setEnabled(True)
        self.csv_button.setEnabled(True)
        self.sweep_shown.emit(report)


def _button(text: str, name: str, parent: QWidget) -> QPushButton:
    button = QPushButton(text, parent)
    button.setObjectName(name)
    button.setEnabled(False)  # until a sweep is shown
    return button


def _table(parent: QWidget) -> QTableWidget:
    table = QTableWidget(0, len(COLUMNS), parent)
    table.setObjectName("switchyardSweepsTable")
    table.setHorizontalHeaderLabels(COLUMNS)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.verticalHeader().setVisible(False)
    return table


def _cells(item: SweepListItem) -> list[str]:
    return [
        str(item.id),
        f"{item.created_at:%Y-%m-%d %H:%M}",
        item.policy,
        f"{item.parameter}={item.settings.replace(' ', '')}",
        str(item.cases),
        DASH if item.anchor_score is None else f"{item.anchor_score:.1f}",
        DASH if item.best_x is None else f"{item.best_x:.2f}x",
    ]


def sweep_html(report: SweepReport) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("point", "score", "tok/s", "× large", "TTFT p50", "p99", "large",
                                             "errors"))  # fmt: skip
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in (
            p.label + (" (anchor)" if p.anchor else ""), f"{p.score:.1f}", f"{p.output_tokens_per_s:,.1f}",
            DASH if p.throughput_x is None else f"{p.throughput_x:.2f}x",
            DASH if p.ttft_p50_ms is None else f"{p.ttft_p50_ms:.0f} ms",
            DASH if p.ttft_p99_ms is None else f"{p.ttft_p99_ms:.0f} ms",
            DASH if p.large_share is None else f"{100 * p.large_share:.0f} %",
            str(p.score_errors + p.load_errors))) + "</tr>"
        for p in report.points)  # fmt: skip
    title = (f"{report.cases} cases from {html.escape(report.suite or report.case_file)}, policy "
             f"{html.escape(report.policy)}, {report.concurrency} streams, {report.load_s:g} s of load per point")  # fmt: skip
    return (f"<h3>{html.escape(report.summary())}</h3><p>{title}</p>"
            f"<table border='1' cellspacing='0' cellpadding='3'><tr>{head}</tr>{rows}</table>"
            f"<p><i>{html.escape(published.reference())}</i></p>")  # fmt: skip
