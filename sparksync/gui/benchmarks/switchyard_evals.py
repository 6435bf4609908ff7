"""The Benchmarks panel's Switchyard tab: stored evals and sweeps, and one's report when selected.

The list reads only the history's plain columns (``EvalHistory.list_evals``);
the whole report, with every case's outcome, is read when a row is chosen.
Both reads run in workers; results come back as signals. The sweeps (score
against throughput at each traffic split, charted beside the published
points) are the second page, ``switchyard_sweeps.SwitchyardSweeps``.
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QSplitter,
    QTableWidget,
    QTabWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.bench import HistoryStore
from sparksync.gui.benchmarks.cells import DASH
from sparksync.gui.benchmarks.switchyard_sweeps import SwitchyardSweeps
from sparksync.gui.workers import Jobs
from sparksync.switchyard.eval.history import EvalHistory, EvalListItem
from sparksync.switchyard.eval.report import EvalReport, TargetReport

LIST_LIMIT = 1000  # as the run list: the newest; `sparksync switchyard history` has the rest
COLUMNS = ("id", "when (UTC)", "policy", "cases", "conc", "gateway", "large", "small", "tok/s gain", "parity")
EMPTY_HINT = (
    "<p>No Switchyard evals stored yet. Run one with <code>sparksync switchyard eval --cases FILE</code>: "
    "it plays the cases against the gateway, the large pool alone and the small pool alone.</p>"
)


def list_evals(path: Path | None) -> list[EvalListItem]:
    return EvalHistory(HistoryStore(path)).list_evals(LIST_LIMIT)


def get_eval(path: Path | None, eval_id: int) -> EvalReport:
    return EvalHistory(HistoryStore(path)).get(eval_id)


class SwitchyardEvals(QWidget):
    evals_loaded = Signal(list)  # EvalListItem
    eval_shown = Signal(object)  # EvalReport
    error_raised = Signal(str)

    def __init__(self, history_path: Path | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("switchyardEvals")
        self.history_path = history_path
        self.jobs = Jobs(self)
        self.jobs.error_raised.connect(self.error_raised)
        self.report: EvalReport | None = None
        self.table = _evals_table(self)
        self.table.itemSelectionChanged.connect(self._on_table_item_selection_changed)
        self.details = QTextBrowser(self)
        self.details.setObjectName("switchyardEvalDetails")
        self.details.setHtml(EMPTY_HINT)
        self.sweeps = SwitchyardSweeps(history_path, self)
        self.sweeps.error_raised.connect(self.error_raised)
        splitter = QSplitter(Qt.Orientation.Vertical, self)
        splitter.addWidget(self.table)
        splitter.addWidget(self.details)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        self.pages = QTabWidget(self)
        self.pages.setObjectName("switchyardPages")
        self.pages.addTab(splitter, "Evals")
        self.pages.addTab(self.sweeps, "Sweeps")
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.pages)

    def reload(self) -> None:
        path = self.history_path
        self.jobs.run("Switchyard evals", lambda: list_evals(path), self._on_evals_listed)
        self.sweeps.reload()

    def open_eval(self, eval_id: int) -> None:
        path = self.history_path
        self.jobs.run("Switchyard eval", lambda: get_eval(path, eval_id), self._on_eval_read)

    def wait(self, timeout: float = 30.0) -> bool:
        return self.jobs.wait(timeout) and self.sweeps.wait(timeout)

    def _on_evals_listed(self, items: list[EvalListItem]) -> None:
        self.table.setRowCount(len(items))
        for row, item in enumerate(items):
            for col, text in enumerate(_cells(item)):
                cell = QTableWidgetItem(text)
                cell.setData(Qt.ItemDataRole.UserRole, item.id)
                self.table.setItem(row, col, cell)
        self.table.resizeColumnsToContents()
        if not items:
            self.details.setHtml(EMPTY_HINT)
        self.evals_loaded.emit(items)

    def _on_table_item_selection_changed(self) -> None:
        rows = {index.row() for index in self.table.selectionModel().selectedRows()}
        item = self.table.item(rows.pop(), 0) if len(rows) == 1 else None
        if item is not None:
            self.open_eval(item.data(Qt.ItemDataRole.UserRole))

    def _on_eval_read(self, report: EvalReport) -> None:
        self.report = report
        self.details.setHtml(eval_html(report))
        self.eval_shown.emit(report)


def _evals_table(parent: QWidget) -> QTableWidget:
    table = QTableWidget(0, len(COLUMNS), parent)
    table.setObjectName("switchyardEvalsTable")
    table.setHorizontalHeaderLabels(COLUMNS)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.verticalHeader().setVisible(False)
    return table


def _cells(item: EvalListItem) -> list[str]:
    parity = "no score" if item.parity is None else ("yes" if item.parity else "no")
    gain = DASH if item.throughput_x is None else f"{item.throughput_x:.2f}x"
    return [
        str(item.id),
        f"{item.created_at:%Y-%m-%d %H:%M}",
        item.policy,
        str(item.cases),
        str(item.concurrency),
        *(_score(s) for s in (item.score_gateway, item.score_large, item.score_small)),
        gain,
        parity,
    ]


def _score(value: float | None) -> str:
    return DASH if value is None else f"{value:.1f}"


def eval_html(report: EvalReport) -> str:
    """The report as the CLI's `switchyard show` gives it, plus each case's outcome per target."""
    title = (f"{report.cases} cases from {html.escape(report.case_file)}, concurrency {report.concurrency}, "
             f"policy {html.escape(report.policy)}, up to {report.max_tokens} tokens per answer")
    head = "".join(f"<th>{h}</th>" for h in ("target", "model", "score", "tok/s", "req/s", "errors", "share"))
    rows = "".join(_target_row(t) for t in report.targets)
    cases = "".join(_cases_html(t) for t in report.targets)
    return (f"<h3>{html.escape(report.gain.summary)}</h3><p>{title}</p>"
            f"<table border='1' cellspacing='0' cellpadding='3'><tr>{head}</tr>{rows}</table>{cases}")


def _target_row(t: TargetReport) -> str:
    share = ", ".join(f"{pool} {100 * s:.0f} %" for pool, s in t.share.items()) or DASH
    cells = (t.label, t.model, f"{t.score:.1f}", f"{t.output_tokens_per_s:,.1f}", f"{t.requests_per_s:.2f}",
             str(t.errors), share)
    return "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"


def _cases_html(t: TargetReport) -> str:
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in (
            o.id, f"{o.score:.0f}", o.pool or DASH, str(o.output_tokens), f"{o.latency_s:.3f}",
            "; ".join(o.notes) or DASH)) + "</tr>"
        for o in t.outcomes)
    head = "".join(f"<th>{h}</th>" for h in ("case", "score", "pool", "tokens", "latency s", "notes"))
    return (f"<h4>{html.escape(t.label)}: each case</h4>"
            f"<table border='1' cellspacing='0' cellpadding='3'><tr>{head}</tr>{rows}</table>")
