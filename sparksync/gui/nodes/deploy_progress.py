"""Per-node deploy progress bars: the hook the deploy code reports through.

``DeployProgressPanel.attach(source)`` subscribes to any
``DeployProgressSource`` (core.node_rows); steps arrive in any thread and
are shown in the GUI thread. ``show_progress`` can also be called directly.
A finished deploy keeps its bar, full and labelled, until the next one.

While a deploy runs, "Cancel" asks it to stop (``cancel_requested``); when
it ends, ``show_summary`` puts the outcome in one plain sentence under the
bars, with each failed node's reason.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.nodes import DeployProgress, DeployProgressSource

_SELECTABLE = Qt.TextInteractionFlag.TextSelectableByMouse


class DeployProgressPanel(QGroupBox):
    progress_received = Signal(object)  # DeployProgress, from any thread
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Agent deploys", parent)
        self.setObjectName("deployProgress")
        outer = QVBoxLayout(self)
        self._empty = QLabel("No deploy running. Deploying the agent to a node shows its progress here.")
        self._empty.setWordWrap(True)
        outer.addWidget(self._empty)
        self._form = QFormLayout()
        outer.addLayout(self._form)
        bottom = QHBoxLayout()
        self.summary = QLabel("")
        self.summary.setObjectName("deploySummary")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(self.summary.textInteractionFlags() | _SELECTABLE)
        bottom.addWidget(self.summary, 1)
        self.cancel_button = QPushButton("Cancel deploy", self)
        self.cancel_button.setObjectName("cancelDeployButton")
        self.cancel_button.setToolTip("Stop the running deploy; nodes not yet changed keep what they ran")
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.cancel_button.hide()
        bottom.addWidget(self.cancel_button)
        outer.addLayout(bottom)
        self.bars: dict[str, QProgressBar] = {}
        self.errors: dict[str, QLabel] = {}  # a node's failure, word-wrapped under its bar
        self._unsubscribe: list[Callable[[], None]] = []
        self.progress_received.connect(self.show_progress)

    def attach(self, source: DeployProgressSource) -> None:
        self._unsubscribe.append(source.add_listener(self.progress_received.emit))

    def detach_all(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()

    def started(self, names: list[str]) -> None:
        """A deploy to ``names`` began: fresh bars for them, Cancel offered."""
        for name in names:
            bar = self.bars.get(name) or self._add_bar(name)
            bar.setRange(0, 1000)
            bar.setValue(0)
            bar.setFormat("waiting")
            bar.setToolTip("")
            self.errors[name].hide()
        self.summary.setText(f"Deploying the agent to {len(names)} node(s)…")
        self.cancel_button.setEnabled(True)
        self.cancel_button.show()

    def ended(self, text: str) -> None:
        self.cancel_button.hide()
        self.summary.setText(text)

    def _on_cancel_clicked(self) -> None:
        self.cancel_button.setEnabled(False)
        self.summary.setText("Cancelling the deploy… nodes part-way through are put back as they were.")
        self.cancel_requested.emit()

    @Slot(object)
    def show_progress(self, step: DeployProgress) -> None:
        bar = self.bars.get(step.node) or self._add_bar(step.node)
        if step.fraction is None and not step.done:
            bar.setRange(0, 0)  # busy, length unknown
        else:
            bar.setRange(0, 1000)
            bar.setValue(1000 if step.done else round(max(0.0, min(1.0, step.fraction or 0.0)) * 1000))
        error = self.errors[step.node]
        error.setVisible(bool(step.error))
        error.setText(step.error or "")
        if step.error:
            text = "failed (why below)"  # a long error would be clipped inside the bar: it wraps below it
        elif step.done:
            text = "done"
        else:
            text = step.stage + ("" if step.fraction is None else " – %p%")
        bar.setFormat(text)
        bar.setToolTip(step.error or step.stage)

    def _add_bar(self, node: str) -> QProgressBar:
        bar = QProgressBar(self)
        bar.setObjectName(f"deploy_{node}")
        bar.setTextVisible(True)
        self.bars[node] = bar
        error = QLabel("", self)
        error.setObjectName(f"deployError_{node}")
        error.setWordWrap(True)
        error.setStyleSheet("color: #c0392b")
        error.setTextInteractionFlags(error.textInteractionFlags() | _SELECTABLE)
        error.hide()
        self.errors[node] = error
        cell = QWidget(self)
        column = QVBoxLayout(cell)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(bar)
        column.addWidget(error)
        self._form.addRow(f"{node}:", cell)
        self._empty.hide()
        return bar
