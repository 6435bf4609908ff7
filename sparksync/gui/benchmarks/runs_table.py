"""The list of stored runs: newest first, partial and failed runs marked, % of the planner's bound beside.

A model over the listing items, so a thousand runs cost one list assignment;
the view asks only for the rows it draws.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import (
    QAbstractTableModel,
    QItemSelection,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
)
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QAbstractItemView, QTableView, QWidget

from sparksync.core.bench import RunListItem
from sparksync.gui.benchmarks.cells import DASH, format_percent_of_bound

COLUMNS = ("id", "when (UTC)", "status", "nodes", "topology", "model", "tok/s", "% of bound", "prefill tok/s",
           "TTFT ms", "label")
STATUS_COLORS = {"partial": QColor("#b7791f"), "failed": QColor("#c0392b")}
STATUS_TEXT = {"complete": "complete", "partial": "⚠ partial", "failed": "✕ failed"}
SIZE_SAMPLE_ROWS = 50  # column widths from the first rows, not all of them
Index = QModelIndex | QPersistentModelIndex


class RunsModel(QAbstractTableModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.items: list[RunListItem] = []
        self._texts: dict[int, list[str]] = {}  # row -> its cells, made when first drawn

    def set_items(self, items: Sequence[RunListItem]) -> None:
        self.beginResetModel()
        self.items, self._texts = list(items), {}
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self.items)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self.text(index.row(), index.column())
        if role == Qt.ItemDataRole.ForegroundRole:
            color = STATUS_COLORS.get(self.items[index.row()].status)
            return QBrush(color) if color is not None else None
        return None

    def text(self, row: int, column: int) -> str:
        texts = self._texts.get(row)
        if texts is None:
            texts = self._texts[row] = row_texts(self.items[row])
        return texts[column]


class RunsTable(QTableView):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("benchRuns")
        self.runs_model = RunsModel(self)
        self.setModel(self.runs_model)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        self.horizontalHeader().setStretchLastSection(True)
        self.horizontalHeader().setResizeContentsPrecision(SIZE_SAMPLE_ROWS)
        self._sized = False

    @property
    def items(self) -> list[RunListItem]:
        return self.runs_model.items

    def show_runs(self, items: Sequence[RunListItem]) -> None:
        self.runs_model.set_items(items)
        if items and not self._sized:
            self._sized = True
            self.resizeColumnsToContents()

    def rowCount(self) -> int:
        return self.runs_model.rowCount()

    def text(self, row: int, column: str) -> str:
        return self.runs_model.text(row, COLUMNS.index(column))

    def selected_ids(self) -> list[int]:
        rows = sorted({index.row() for index in self.selectionModel().selectedRows()})
        return [self.items[row].id for row in rows if row < len(self.items)]

    def select_id(self, run_id: int) -> None:
        for row, item in enumerate(self.items):
            if item.id == run_id:
                self.selectRow(row)
                return


    def select_ids(self, run_ids: list[int]) -> None:
        """Select these runs together (as Ctrl-click would), e.g. two to compare."""
        selection = QItemSelection()
        for row, item in enumerate(self.items):
            if item.id in run_ids:
                selection.select(self.model().index(row, 0), self.model().index(row, self.model().columnCount() - 1))
        self.selectionModel().select(selection, QItemSelectionModel.SelectionFlag.ClearAndSelect)


def row_texts(item: RunListItem) -> list[str]:
    throughput = item.train_tps if item.kind == "training" else item.decode_tps
    return [str(item.id), item.created_at.strftime("%Y-%m-%d %H:%M"), STATUS_TEXT.get(item.status, item.status),
            str(item.cluster_size), item.topology or DASH, item.model, _num(throughput),
            _beside_model(item), _num(item.prefill_tps), _num(item.ttft_ms),
            item.label or ""]


def _num(value: float | None) -> str:
    return DASH if value is None else f"{value:,.2f}"


def _beside_model(item: RunListItem) -> str:
    """The decode % of bound with the model the bound assumes beside it: "75.5 % (1 node)"."""
    percent = format_percent_of_bound(item.decode_percent_of_bound)
    return percent if item.decode_percent_of_bound is None else f"{percent} ({item.bound_label})"
