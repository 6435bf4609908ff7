"""Core export tables (sparksync.core.bench.exports) shown as Qt tables and HTML, with the same cells."""

from __future__ import annotations

import html

from PySide6.QtWidgets import QAbstractItemView, QTableWidget, QTableWidgetItem

from sparksync.core.bench import Table
from sparksync.gui.benchmarks.cells import format_cell


def fill_table(widget: QTableWidget, table: Table) -> None:
    widget.clear()
    widget.setColumnCount(len(table.columns))
    widget.setRowCount(len(table.rows))
    widget.setHorizontalHeaderLabels(table.columns)
    widget.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    widget.verticalHeader().setVisible(False)
    for r, row in enumerate(table.rows):
        for c, (column, value) in enumerate(zip(table.columns, row, strict=True)):
            widget.setItem(r, c, QTableWidgetItem(format_cell(column, value, str(row[0]))))
    widget.resizeColumnsToContents()


def table_html(table: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(format_cell(c, v, str(row[0])))}</td>"
                         for c, v in zip(table.columns, row, strict=True)) + "</tr>"
        for row in table.rows)
    notes = "".join(f"<li>{html.escape(note)}</li>" for note in table.notes)
    return (f"<h3>{html.escape(table.title)}</h3><table border='1' cellspacing='0' cellpadding='3'>"
            f"<tr>{head}</tr>{body}</table>" + (f"<ul>{notes}</ul>" if notes else ""))
