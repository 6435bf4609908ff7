"""Running workloads as a tree: one row per workload, one child per process with its node and state."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QTreeWidget, QTreeWidgetItem, QWidget

from sparksync.core.workloads import RankView, WorkloadRow

COLUMNS = ["Workload / process", "Node", "State", "Tok/s", "Detail", "Scaling"]
ID_ROLE = Qt.ItemDataRole.UserRole  # the workload id
NAME_ROLE = Qt.ItemDataRole.UserRole + 1  # the process name; None on a workload row
STATE_COLOURS = {"ready": "#76b900", "failed": "#c0392b", "lost": "#c0392b", "unreachable": "#f0a020",
                 "starting": "#3498db", "restarting": "#f0a020"}  # fmt: skip


class WorkloadTable(QTreeWidget):
    selection_moved = Signal(object)  # (workload id, process name or None), or None

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("workloads")
        self.setColumnCount(len(COLUMNS))
        self.setHeaderLabels(COLUMNS)
        self.setColumnWidth(0, 340)
        self.setWordWrap(True)  # a long detail wraps in its cell; the whole of it shows in the panel's pane
        self.setUniformRowHeights(False)
        self.rows: list[WorkloadRow] = []
        self.currentItemChanged.connect(
            lambda current, _previous: self.selection_moved.emit(self.key(current))
        )

    def show_rows(self, rows: list[WorkloadRow]) -> None:
        """Rebuild from the latest reading, keeping what was selected and which workloads were folded."""
        selected = self.key(self.currentItem())
        folded = {self.key(self.topLevelItem(i)) for i in range(self.topLevelItemCount())
                  if not self.topLevelItem(i).isExpanded()}  # fmt: skip
        # Failed and gone workloads leave the list an hour after they ended (Prune drops them sooner).
        rows = [row for row in rows if not row.stale]
        self.rows = list(rows)
        self.blockSignals(True)
        self.clear()
        for row in rows:
            top = self._workload_item(row)
            top.setExpanded((row.view.workload_id, None) not in folded)
            for rank in sorted(row.view.ranks, key=lambda r: (r.ref.group, r.ref.rank)):
                self._rank_item(top, row.view.workload_id, rank)
        self._select(selected)
        self.blockSignals(False)

    def _workload_item(self, row: WorkloadRow) -> QTreeWidgetItem:
        view = row.view
        rate = row.tokens_text()
        endpoints = ", ".join(f"http://{e.host}:{e.port} on {e.node}" for e in view.record.endpoints)
        # Training: efficiency against the one-node baseline (or why there is none), per group.
        scaling = "; ".join(s.describe() if len(row.scaling) == 1 else f"{s.group}: {s.describe()}"
                            for s in row.scaling)  # fmt: skip
        item = QTreeWidgetItem(self, [view.workload_id, ", ".join(view.record.nodes()), view.state, rate,
                                      endpoints, scaling])  # fmt: skip
        item.setData(0, ID_ROLE, view.workload_id)
        # Each flag in full (reason and what to do): the cell only has room for its short form.
        item.setToolTip(5, "\n".join([f"{s.group} ({s.key or 'setup unknown'}): {s.setup or ''}"
                                       for s in row.scaling]
                                      + [f"⚠ {s.group}: {f.text()}" for s in row.scaling for f in s.flags]))  # fmt: skip
        _colour(item, view.state)
        return item

    def _rank_item(self, top: QTreeWidgetItem, workload_id: str, rank: RankView) -> QTreeWidgetItem:
        detail = "" if rank.state in ("ready", "starting") else rank.why()
        if rank.status is not None and rank.status.pid and not detail:
            detail = f"pid {rank.status.pid}"
        item = QTreeWidgetItem(top, [f"rank {rank.ref.rank}: {rank.ref.name}", rank.ref.node, rank.state, "",
                                     detail])  # fmt: skip
        item.setData(0, ID_ROLE, workload_id)
        item.setData(0, NAME_ROLE, rank.ref.name)
        item.setToolTip(4, detail)
        _colour(item, rank.state)
        return item

    def _select(self, key) -> None:
        if key is None:
            return
        for item in self._items():
            if self.key(item) == key:
                self.setCurrentItem(item)
                return

    def _items(self) -> list[QTreeWidgetItem]:
        found = []
        for i in range(self.topLevelItemCount()):
            top = self.topLevelItem(i)
            found.append(top)
            found += [top.child(j) for j in range(top.childCount())]
        return found

    @staticmethod
    def key(item: QTreeWidgetItem | None):
        return None if item is None else (item.data(0, ID_ROLE), item.data(0, NAME_ROLE) or None)

    def select(self, workload_id: str, name: str | None = None) -> None:
        """Select a workload (or one of its processes); tells ``selection_moved``."""
        self._select((workload_id, name))

    def detail_of(self, item: QTreeWidgetItem | None) -> str:
        """Everything known about a row, in full, for the details pane under the table."""
        if item is None:
            return ""
        parts = [f"<b>{item.text(0)}</b> on {item.text(1)}: {item.text(2)}"]
        if item.text(3) not in ("", "-"):
            parts.append(f"{item.text(3)} tok/s")
        for column, label in ((4, "endpoints" if item.parent() is None else "detail"), (5, "scaling")):
            if item.text(column):
                parts.append(f"{label}: {item.text(column)}")
        return "<br>".join(parts)

    def state_of(self, workload_id: str, name: str | None = None) -> str | None:
        for item in self._items():
            if self.key(item) == (workload_id, name):
                return item.text(2)
        return None


def _colour(item: QTreeWidgetItem, state: str) -> None:
    colour = STATE_COLOURS.get(state)
    if colour:
        item.setForeground(2, QColor(colour))
