"""The model × node matrix: present (verified), partial or missing per node, sizes, free space per node."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QTableWidget, QTableWidgetItem, QWidget

from sparksync.core.models import ModelMatrix

STATE_TEXT = {"present": "present ✓", "partial": "partial", "missing": "—", "unknown": "?"}
STATE_COLOURS = {"present": "#76b900", "partial": "#f0a020", "missing": "#888888", "unknown": "#c0392b"}
NAME_ROLE = Qt.ItemDataRole.UserRole


def size_text(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


class ModelMatrixTable(QTableWidget):
    """Rows: models, then a last row of free space; columns: size, then one per node."""

    selection_moved = Signal(object)  # (model, node or None), or None

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("modelMatrix")
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.matrix: ModelMatrix | None = None
        self.currentCellChanged.connect(lambda row, col, _r, _c: self.selection_moved.emit(self.at(row, col)))

    def show_matrix(self, matrix: ModelMatrix) -> None:
        selected = self.at(self.currentRow(), self.currentColumn())
        self.matrix = matrix
        nodes = [c.name for c in matrix.nodes]
        self.blockSignals(True)
        self.clear()
        self.setColumnCount(1 + len(nodes))
        self.setRowCount(len(matrix.models) + 1)
        self.setHorizontalHeaderLabels(["Size", *nodes])
        self.setVerticalHeaderLabels([*matrix.models, "free"])
        for row, name in enumerate(matrix.models):
            size = QTableWidgetItem(size_text(matrix.sizes.get(name)))
            size.setData(NAME_ROLE, name)
            self.setItem(row, 0, size)
            for col, node in enumerate(nodes, start=1):
                cell = matrix.cell(name, node)
                item = QTableWidgetItem(STATE_TEXT[cell.state])
                item.setForeground(QColor(STATE_COLOURS[cell.state]))
                item.setToolTip(cell.path or cell.state)
                self.setItem(row, col, item)
        last = len(matrix.models)
        self.setItem(last, 0, QTableWidgetItem(""))
        for col, column in enumerate(matrix.nodes, start=1):
            item = QTableWidgetItem("unreachable" if column.error else size_text(column.free_bytes))
            item.setToolTip(column.error or f"free on {column.store}")
            if column.error:
                item.setForeground(QColor(STATE_COLOURS["unknown"]))
            self.setItem(last, col, item)
        self.resizeColumnsToContents()
        if selected is not None and selected[0] in matrix.models:
            row = matrix.models.index(selected[0])
            col = 1 + nodes.index(selected[1]) if selected[1] in nodes else 0
            self.setCurrentCell(row, col)
        self.blockSignals(False)

    def at(self, row: int, col: int) -> tuple[str, str | None] | None:
        if self.matrix is None or not 0 <= row < len(self.matrix.models):
            return None
        node = self.matrix.nodes[col - 1].name if 1 <= col <= len(self.matrix.nodes) else None
        return self.matrix.models[row], node
