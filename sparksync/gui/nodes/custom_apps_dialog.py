"""Custom apps, edited: a name, the node's port, an optional start script and browser path.

The list is read and written through ``ClusterActions`` in workers; the
tray's per-node menus follow ``apps_changed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from sparksync.gui.workers import Jobs

if TYPE_CHECKING:
    from sparksync.core.apps import CustomApp


class CustomAppsDialog(QDialog):
    apps_changed = Signal()

    def __init__(self, actions, jobs: Jobs, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Custom apps")
        self.setObjectName("customAppsDialog")
        self.setMinimumWidth(520)
        self.actions = actions
        self.jobs = jobs
        self.apps: list[CustomApp] = []
        self._build()
        self.reload()

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.addWidget(
            QLabel("Apps open from the tray's node menus, through an SSH tunnel to the node.", self)
        )
        self.list = QListWidget(self)
        self.list.setObjectName("appList")
        layout.addWidget(self.list)
        form = QFormLayout()
        self.name = QLineEdit(self)
        self.name.setPlaceholderText("Jupyter")
        self.port = QSpinBox(self)
        self.port.setRange(1, 65535)
        self.port.setValue(8888)
        self.script = QPlainTextEdit(self)
        self.script.setPlaceholderText(
            "optional: run on the node while the app is open, e.g. jupyter lab --port 8888"
        )
        self.script.setMaximumHeight(70)
        self.path = QLineEdit(self)
        self.path.setPlaceholderText("optional: open the browser at this path, e.g. /lab")
        for label, widget in (("Name", self.name), ("Port on the node", self.port),
                              ("Start script", self.script), ("Browser path", self.path)):  # fmt: skip
            form.addRow(f"{label}:", widget)
        layout.addLayout(form)
        self.error = QLabel("", self)
        self.error.setStyleSheet("color: #c0392b")
        self.error.setWordWrap(True)
        layout.addWidget(self.error)
        buttons = QHBoxLayout()
        self.add_button = QPushButton("Add", self)
        self.add_button.clicked.connect(self.add)
        self.remove_button = QPushButton("Remove selected", self)
        self.remove_button.clicked.connect(self.remove_selected)
        close = QPushButton("Close", self)
        close.clicked.connect(self.accept)
        for button in (self.add_button, self.remove_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(close)
        layout.addLayout(buttons)

    def reload(self) -> None:
        self.jobs.run(
            "Reading the custom apps", self.actions.custom_apps, self._on_apps_read, self._show_error
        )

    def _on_apps_read(self, apps: list[CustomApp]) -> None:
        self.apps = list(apps)
        from sparksync.core.apps import DGX_DASHBOARD  # loaded by the worker that read ``apps``

        self.list.clear()
        for app in apps:
            extras = [f"script: {app.start_script}" if app.start_script else "", app.browser_path or ""]
            built_in = " (built in)" if app == DGX_DASHBOARD else ""
            self.list.addItem(
                f"{app.name}{built_in}: port {app.remote_port}  " + "  ".join(e for e in extras if e)
            )

    def add(self) -> bool:
        from sparksync.core.apps import CustomApp

        try:
            app = CustomApp(
                name=self.name.text().strip(),
                remote_port=self.port.value(),
                start_script=self.script.toPlainText().strip() or None,
                browser_path=self.path.text().strip() or None,
            )
        except ValidationError as exc:
            error = exc.errors()[0]
            self._show_error(f"{error['loc'][0]}: {error['msg']}")
            return False
        self.error.clear()
        self.jobs.run(
            f"Adding {app.name}", lambda: self.actions.add_app(app), self._on_changed, self._show_error
        )
        return True

    def remove_selected(self) -> bool:
        from sparksync.core.apps import DGX_DASHBOARD

        row = self.list.currentRow()
        if row < 0 or row >= len(self.apps) or self.apps[row] == DGX_DASHBOARD:
            self._show_error("Select one of your apps; the DGX Dashboard is built in.")
            return False
        name = self.apps[row].name
        self.jobs.run(
            f"Removing {name}", lambda: self.actions.remove_app(name), self._on_changed, self._show_error
        )
        return True

    def _on_changed(self, _result=None) -> None:
        self.apps_changed.emit()
        self.reload()

    def _show_error(self, message: str) -> None:
        self.error.setText(f"⚠ {message}")
