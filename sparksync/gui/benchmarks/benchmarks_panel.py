"""The Benchmarks tab: the run history, one run's details, scaling charts, comparisons, exports and new runs.

Every history read, export and run happens in a worker (``Jobs`` or a
``BenchJob``); results come back as signals. The tab reads the history the
first time it is shown and again after each run.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMenu,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTabWidget,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.bench import (
    BenchInputError,
    BenchProgress,
    BenchRequest,
    Comparison,
    Exportable,
    RunRecord,
    ScalingReport,
    tables_of,
)
from sparksync.core.base import format_tokens_per_s
from sparksync.gui.benchmarks import history_calls
from sparksync.gui.benchmarks.bench_job import BenchJob
from sparksync.gui.benchmarks.run_details import run_html
from sparksync.gui.benchmarks.run_dialog import RunDialog
from sparksync.gui.benchmarks.runs_table import RunsTable
from sparksync.gui.benchmarks.scaling_chart import ScalingChart
from sparksync.gui.benchmarks.switchyard_evals import SwitchyardEvals
from sparksync.gui.benchmarks.tables import fill_table
from sparksync.gui.workers import Jobs

log = logging.getLogger(__name__)

PROGRESS_STEPS = 1000
RUNS_WIDTH = 560  # the run list's first width: id to % of bound in view
TRACE_NAME = "benchmark"  # the dashboard's tokens/s series: tok.workload.benchmark
QUIT_WAIT_S = 30.0  # llama-benchy's SIGINT grace plus storing the partial run
SCALING_TAB, COMPARE_TAB = 1, 2
SCALING_HINT = "Select a run of a scale sweep (sparksync bench scale), or several runs of one model, on the left."
COMPARE_HINT = "Select two runs on the left (Ctrl-click the second) to see them side by side."
EXPORT_FORMATS = (("CSV", "csv"), ("JSON", "json"), ("Markdown", "md"), ("PNG chart", "png"))


class BenchmarksPanel(QWidget):
    runs_loaded = Signal(list)  # RunListItem
    run_shown = Signal(object)  # RunRecord
    scaling_shown = Signal(object)  # ScalingReport
    comparison_shown = Signal(object)  # Comparison
    exported = Signal(object)  # Path
    run_finished = Signal(object)  # the stored RunRecord
    last_run_changed = Signal()  # whether a run can be repeated (``has_last_run``) may have changed
    status_message = Signal(str)
    error_raised = Signal(str)
    # (trace name, Unix time, tok/s) while a run decodes: the dashboard's tokens/s plot draws it
    tokens_measured = Signal(str, float, float)

    def __init__(self, history_path: Path | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("benchmarksPanel")
        self.history_path = history_path  # None: the usual file in SPARKSYNC_HOME
        self.jobs = Jobs(self)
        self.jobs.error_raised.connect(self._on_jobs_error_raised)
        self.record: RunRecord | None = None
        self.report: ScalingReport | None = None
        self.comparison: Comparison | None = None
        self.job: BenchJob | None = None
        self.has_last_run = False  # an inference run is stored: the tray's "Run last benchmark" repeats it
        self._loaded_once = False
        self._build()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self._on_app_about_to_quit)

    # --- layout ------------------------------------------------------------------------

    def _build(self) -> None:
        self.runs = RunsTable(self)
        self.runs.selectionModel().selectionChanged.connect(self._on_runs_selection_changed)
        self.details = QTextBrowser(self)
        self.details.setObjectName("benchDetails")
        self.chart = ScalingChart(self)
        self.scaling_table = QTableWidget(self)
        # A figure that should not be believed as it stands says why, above the table, in red.
        self.scaling_flags = QLabel("", self)
        self.scaling_flags.setObjectName("scalingFlags")
        self.scaling_flags.setWordWrap(True)
        self.scaling_flags.setStyleSheet("color: #b00020;")
        self.scaling_flags.hide()
        self.compare_table = QTableWidget(self)
        self.compare_notes = QLabel(COMPARE_HINT, self)
        self.compare_notes.setWordWrap(True)
        self.scaling_notes = QLabel(SCALING_HINT, self)
        self.scaling_notes.setWordWrap(True)
        # The one way to a scaling chart or a comparison: its tab, over the runs selected on the left.
        self.views = QTabWidget(self)
        self.views.addTab(self.details, "Details")
        self.views.addTab(_stack(self, self.scaling_notes, self.chart, self.scaling_flags, self.scaling_table,
                                 stretch=(0, 3, 0, 2)), "Scaling")
        self.views.addTab(_stack(self, self.compare_notes, self.compare_table, stretch=(0, 1)), "Compare")
        self.views.currentChanged.connect(self._on_views_current_changed)
        self.switchyard = SwitchyardEvals(self.history_path, self)  # `switchyard eval` results
        self.views.addTab(self.switchyard, "Switchyard")
        self.switchyard.error_raised.connect(self.error_raised)
        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        splitter.addWidget(self.runs)
        splitter.addWidget(self.views)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        splitter.setSizes([RUNS_WIDTH, RUNS_WIDTH * 2])
        column = QVBoxLayout(self)
        column.addLayout(self._toolbar())
        column.addWidget(splitter, 1)
        column.addLayout(self._progress_row())
        self.details.setHtml("<p>Select a run to see its figures.</p>")

    def _toolbar(self) -> QHBoxLayout:
        self.run_button = QPushButton("Run benchmark…", self)
        self.run_button.clicked.connect(self.open_run_dialog)
        self.refresh_button = QPushButton("Refresh", self)
        self.refresh_button.clicked.connect(self.reload)
        self.export_button = QToolButton(self)
        self.export_button.setText("Export")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        for text, fmt in EXPORT_FORMATS:
            menu.addAction(text, lambda fmt=fmt: self.ask_export(fmt))
        self.export_button.setMenu(menu)
        row = QHBoxLayout()
        for widget in (self.run_button, self.refresh_button, self.export_button):
            row.addWidget(widget)
        row.addStretch(1)
        return row

    def _progress_row(self) -> QHBoxLayout:
        self.progress = QProgressBar(self)
        self.progress.setRange(0, PROGRESS_STEPS)
        self.progress_label = QLabel("", self)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.cancel_run)
        row = QHBoxLayout()
        row.addWidget(self.progress, 2)
        row.addWidget(self.progress_label, 3)
        row.addWidget(self.cancel_button)
        self._set_running(False)
        return row

    # --- history ------------------------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._loaded_once:
            self._loaded_once = True
            self.reload()

    def reload(self) -> None:
        path = self.history_path
        self.jobs.run("benchmark history", lambda: history_calls.list_runs(path), self._on_runs_listed)
        self.switchyard.reload()

    def open_run(self, run_id: int) -> None:
        path = self.history_path
        self.jobs.run("benchmark run", lambda: history_calls.get_run(path, run_id), self._on_run_read)

    def show_scaling(self, run_ids: list[int]) -> None:
        path = self.history_path
        self.jobs.run("scaling report", lambda: history_calls.scaling_of(path, run_ids), self._on_scaling_made)

    def compare(self, a: int, b: int) -> None:
        path = self.history_path
        self.jobs.run("comparison", lambda: history_calls.comparison_of(path, a, b), self._on_comparison_made)

    # --- exports ------------------------------------------------------------------------

    def subject(self) -> Exportable | None:
        """What Export writes: what the current view shows."""
        subjects = (self.record, self.report, self.comparison)
        index = self.views.currentIndex()
        return subjects[index] if index < len(subjects) else None

    def ask_export(self, fmt: str) -> None:
        subject = self.subject()
        if subject is None:
            self._tell("Nothing to export yet: open a run, a scaling chart or a comparison.")
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export", f"{_stem(subject)}.{fmt}")
        if path:
            self.export_to(fmt, Path(path))

    def export_to(self, fmt: str, path: Path) -> None:
        subject = self.subject()
        if subject is None:
            self._tell("Nothing to export yet: open a run, a scaling chart or a comparison.")
            return
        if fmt == "png" and isinstance(subject, ScalingReport):
            image = self.chart.image()  # drawn here (Qt needs the GUI thread), written in the worker
            self.jobs.run("export", lambda: _save_image(image, path), self._on_export_written)
            return
        self.jobs.run("export", lambda: history_calls.export(subject, fmt, path), self._on_export_written)

    # --- running ------------------------------------------------------------------------

    def open_run_dialog(self) -> RunDialog:
        dialog = RunDialog(self)
        dialog.accepted.connect(lambda: self.start_run(dialog.request))
        dialog.open()
        return dialog

    def start_run(self, request: BenchRequest) -> BenchJob | None:
        if self.job is not None and self.job.is_running():
            self._tell("A benchmark is already running; cancel it or wait for it to finish.")
            return None
        self.job = BenchJob(request, self.history_path, self)
        self.job.progressed.connect(self._on_job_progressed)
        self.job.finished.connect(self._on_job_finished)
        self.job.failed.connect(self._on_job_failed)
        self.progress.setValue(0)
        self.progress_label.setText(f"Starting: checking {request.endpoint.base_url}…")
        self._set_running(True)
        self.job.start()
        return self.job

    def run_last(self) -> None:
        """Run the newest stored benchmark again (the tray's "Run the last benchmark")."""
        path = self.history_path
        self.jobs.run("last benchmark", lambda: history_calls.last_request(path), self.start_run)

    def read_last_run(self) -> None:
        """Find out (in a worker) whether a stored run can be repeated; ``last_run_changed`` tells."""
        path = self.history_path
        self.jobs.run("benchmark history", lambda: history_calls.has_last_run(path), self._set_has_last_run)

    def _set_has_last_run(self, has: bool) -> None:
        if has != self.has_last_run:
            self.has_last_run = has
            self.last_run_changed.emit()

    def cancel_run(self) -> None:
        if self.job is not None:
            self.job.cancel()
            self.cancel_button.setEnabled(False)
            self.progress_label.setText("Cancelling: llama-benchy is saving the tests it finished…")

    def is_running(self) -> bool:
        return (self.job is not None and self.job.is_running()) or self.jobs.busy()

    def wait(self, timeout: float = 60.0) -> bool:
        """For tests and shutdown: wait for every worker (never from a slot)."""
        done = self.jobs.wait(timeout) and self.switchyard.wait(timeout)
        return (self.job.wait(timeout) if self.job is not None else True) and done

    # --- slots --------------------------------------------------------------------------

    def _on_app_about_to_quit(self) -> None:
        # llama-benchy runs in its own session: stop it (it saves what it finished) rather than orphan it.
        if self.job is not None and self.job.is_running():
            self.job.cancel()
            self.job.wait(QUIT_WAIT_S)

    def _on_runs_listed(self, items: list) -> None:
        self.runs.show_runs(items)
        inference = any(item.kind == "inference" for item in items)
        if inference or len(items) < history_calls.LIST_LIMIT:  # a full list may hide older runs
            self._set_has_last_run(inference)
        self.runs_loaded.emit(items)

    def _on_runs_selection_changed(self, *_args) -> None:
        self._show_selection()

    def _on_views_current_changed(self, _index: int) -> None:
        self._show_selection(quiet=True)

    def _show_selection(self, quiet: bool = False) -> None:
        """What the current tab shows of the selected runs: a run's details, their scaling, or two compared."""
        ids = self.runs.selected_ids()
        index = self.views.currentIndex()
        if index == SCALING_TAB:
            if ids:
                self.show_scaling(ids)
            return
        if index == COMPARE_TAB:
            if len(ids) == 2:
                self.compare(ids[1], ids[0])  # the older one first: ratios read as "new against old"
            elif ids and not quiet:
                self._tell(f"Select exactly two runs to compare ({len(ids)} selected).")
            return
        if len(ids) == 1:
            self.open_run(ids[0])

    def _on_run_read(self, record: RunRecord) -> None:
        self.record = record
        self.details.setHtml(run_html(record))
        self.run_shown.emit(record)

    def _on_scaling_made(self, report: ScalingReport) -> None:
        self.report = report
        self.chart.show_report(report)
        fill_table(self.scaling_table, tables_of(report)[0])
        flagged = [f"{row.cluster_size} node(s), run {row.run_id}: {flag.reason}; {flag.action}"
                   for row in report.rows for flag in row.flags]
        self.scaling_flags.setText("\n".join(f"⚠ {line}" for line in flagged))
        self.scaling_flags.setVisible(bool(flagged))
        self.scaling_notes.setText(SCALING_HINT)
        self.views.setCurrentIndex(SCALING_TAB)
        self.scaling_shown.emit(report)

    def _on_comparison_made(self, comparison: Comparison) -> None:
        self.comparison = comparison
        table = tables_of(comparison)[0]
        fill_table(self.compare_table, table)
        self.compare_notes.setText(table.title + "".join(f"\n• {note}" for note in table.notes))
        self.views.setCurrentIndex(COMPARE_TAB)
        self.comparison_shown.emit(comparison)

    def _on_export_written(self, path: Path) -> None:
        self._tell(f"Exported {path}")
        self.exported.emit(path)

    def _on_job_progressed(self, progress: BenchProgress) -> None:
        self.progress.setValue(round(progress.fraction * PROGRESS_STEPS))
        if progress.tokens_per_second is not None:
            self.tokens_measured.emit(TRACE_NAME, time.time(), progress.tokens_per_second)
        rate = "" if progress.tokens_per_second is None else f", {format_tokens_per_s(progress.tokens_per_second)}"
        test = f" ({progress.current_test})" if progress.current_test else ""
        errors = f", {progress.errors} error(s)" if progress.errors else ""
        self.progress_label.setText(f"{progress.requests_done} of {progress.requests_total} requests{test}"
                                    f"{rate}{errors}")

    def _on_job_finished(self, record: RunRecord) -> None:
        self._set_running(False)
        verdict = {"complete": "finished", "partial": "stopped early (partial, kept)", "failed": "failed"}
        self.progress_label.setText(f"Run {record.id} {verdict[record.status]}"
                                    + (f": {record.error}" if record.error else ""))
        if record.status == "complete":
            self.progress.setValue(PROGRESS_STEPS)
        self.reload()
        self._on_run_read(record)
        if record.kind == "inference":
            self._set_has_last_run(True)
        self.run_finished.emit(record)

    def _on_job_failed(self, message: str) -> None:
        self._set_running(False)
        self.progress_label.setText(message)
        self.error_raised.emit(message)

    def _on_jobs_error_raised(self, message: str) -> None:
        if not self.is_running():
            self.progress_label.setText(message)  # seen here too, not only in the window's status bar
        self.error_raised.emit(message)

    def _set_running(self, running: bool) -> None:
        for widget in (self.progress, self.progress_label, self.cancel_button):
            widget.setVisible(running or widget is self.progress_label)
        self.cancel_button.setEnabled(running)
        self.run_button.setEnabled(not running)

    def _tell(self, message: str) -> None:
        self.status_message.emit(message)
        self.progress_label.setText(message)


def _stack(parent: QWidget, *widgets: QWidget, stretch: tuple[int, ...]) -> QWidget:
    holder = QWidget(parent)
    column = QVBoxLayout(holder)
    column.setContentsMargins(0, 0, 0, 0)
    for widget, factor in zip(widgets, stretch, strict=True):
        column.addWidget(widget, factor)
    return holder


def _stem(subject: Exportable) -> str:
    if isinstance(subject, RunRecord):
        return f"bench-run-{subject.id}"
    if isinstance(subject, Comparison):
        return f"bench-compare-{subject.a_id}-{subject.b_id}"
    return f"bench-scaling-{subject.model}".replace("/", "_")


def _save_image(image, path: Path) -> Path:
    if not image.save(str(path), "PNG"):
        raise BenchInputError(f"could not write {path}; check the folder exists and is writable")
    return path
