"""One progress bar per node for a copy or a fetch: bytes, GB/s, ETA, and the step it is at."""

from __future__ import annotations

from PySide6.QtWidgets import QGridLayout, QLabel, QProgressBar, QWidget

from sparksync.core.models import CopyEvent
from sparksync.gui.models.model_matrix import size_text

FAILED = {"failed", "cancelled"}


class CopyBars(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("copyBars")
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.rows: dict[str, tuple[QLabel, QProgressBar, QLabel]] = {}

    def clear(self) -> None:
        for name, label, bar, detail in [(n, *r) for n, r in self.rows.items()]:
            for widget in (label, bar, detail):
                self.grid.removeWidget(widget)
                widget.deleteLater()
        self.rows.clear()

    def show_event(self, event: CopyEvent) -> None:
        label, bar, detail = self._row(event.node)
        total = max(event.bytes_total, 1)
        bar.setValue(int(1000 * min(event.bytes_done, total) / total))
        if event.phase in ("done", "present"):
            bar.setValue(1000)
        parts = [f"{size_text(event.bytes_done)} / {size_text(event.bytes_total)}"]
        if event.rate_bps:
            parts.append(f"{event.rate_bps / 1e9:.3f} GB/s")
        if event.eta_s is not None and event.phase in ("copying", "relaying", "fetching"):
            parts.append(f"ETA {event.eta_s:.0f} s")
        parts.append(event.phase + (f" ({event.route})" if event.route else ""))
        if event.message and event.phase in (*FAILED, "recopying", "done", "present"):
            parts.append(event.message)
        detail.setText("  ".join(parts))
        detail.setStyleSheet("color: #c0392b;" if event.phase in FAILED else "")

    def _row(self, node: str) -> tuple[QLabel, QProgressBar, QLabel]:
        row = self.rows.get(node)
        if row is None:
            index = len(self.rows)
            label = QLabel(node, self)
            bar = QProgressBar(self, objectName=f"bar:{node}")
            bar.setRange(0, 1000)
            bar.setTextVisible(False)
            detail = QLabel("", self, objectName=f"detail:{node}")
            self.grid.addWidget(label, index, 0)
            self.grid.addWidget(bar, index, 1)
            self.grid.addWidget(detail, index, 2)
            self.grid.setColumnStretch(1, 1)
            self.grid.setColumnStretch(2, 2)
            row = self.rows[node] = (label, bar, detail)
        return row
