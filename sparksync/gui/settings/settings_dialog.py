"""The Settings dialog: sampling rate, plot window, theme, where data lives, keyring, start at login.

It edits a copy of ``AppSettings`` and hands the result to the window
(``settings_accepted``), which applies and saves it in a worker. The keyring
check talks to D-Bus or the OS keychain, so it runs in a worker too and the
label says "checking…" meanwhile.
"""

from __future__ import annotations

import os

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.base import HOME_ENV, cache_dir, config_dir, data_dir, log_dir
from sparksync.core.apps import AppSettings, Theme
from sparksync.gui.dashboard.window_picker import WINDOWS
from sparksync.gui.workers import Jobs

THEMES = ((Theme.SYSTEM, "Follow the system"), (Theme.LIGHT, "Light"), (Theme.DARK, "Dark"))


class SettingsDialog(QDialog):
    settings_accepted = Signal(object)  # AppSettings

    def __init__(self, settings: AppSettings, actions, jobs: Jobs, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("SparkSync settings")
        self.setObjectName("settingsDialog")
        self.setMinimumWidth(560)
        self.settings = settings
        self.actions = actions
        self.jobs = jobs
        self._build()
        self.check_keyring()

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        view = QGroupBox("Dashboard", self)
        form = QFormLayout(view)
        self.sample_hz = QDoubleSpinBox(self)
        self.sample_hz.setObjectName("sampleHz")
        self.sample_hz.setRange(0.1, 10.0)
        self.sample_hz.setSingleStep(0.5)
        self.sample_hz.setDecimals(1)
        self.sample_hz.setSuffix(" Hz")
        self.sample_hz.setValue(self.settings.sample_hz)
        self.sample_hz.setToolTip(
            "How often the agents sample (1 to 10 Hz is usual); applies from the next start."
        )
        form.addRow("Sampling rate:", self.sample_hz)
        self.window = QComboBox(self)
        self.window.setObjectName("window")
        for seconds, text in WINDOWS:
            self.window.addItem(text, seconds)
        self.window.setCurrentIndex(self.window.findData(self.settings.window_s))
        form.addRow("Plot window:", self.window)
        self.theme = QComboBox(self)
        self.theme.setObjectName("theme")
        for theme, text in THEMES:
            self.theme.addItem(text, theme.value)
        self.theme.setCurrentIndex(self.theme.findData(self.settings.theme.value))
        form.addRow("Theme:", self.theme)
        layout.addWidget(view)
        layout.addWidget(self._data_box())
        system = QGroupBox("This computer", self)
        sform = QFormLayout(system)
        self.keyring = QLabel("checking…", self)
        self.keyring.setObjectName("keyringStatus")
        self.keyring.setWordWrap(True)
        sform.addRow("Keyring:", self.keyring)
        self.start_at_login = QCheckBox("Start SparkSync when I log in", self)
        self.start_at_login.setObjectName("startAtLogin")
        self.start_at_login.setChecked(self.settings.start_at_login)
        sform.addRow("", self.start_at_login)
        layout.addWidget(system)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def _data_box(self) -> QGroupBox:
        box = QGroupBox("Where data lives", self)
        form = QFormLayout(box)
        home = os.environ.get(HOME_ENV)
        form.addRow(f"{HOME_ENV}:", self._path_label(home or "not set (the platform's usual places)"))
        for title, path in (("Settings and nodes", config_dir()), ("Data and history", data_dir()),
                            ("Cache", cache_dir()), ("Logs", log_dir())):  # fmt: skip
            form.addRow(f"{title}:", self._path_label(str(path)))
        return box

    def _path_label(self, text: str) -> QLabel:
        label = QLabel(text, self)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setToolTip(text)
        return label

    # --- keyring ------------------------------------------------------------------------

    def check_keyring(self) -> None:
        self.keyring.setText("checking…")
        self.jobs.run(
            "Checking the keyring",
            self.actions.keyring_status,
            self._on_keyring_status,
            self._on_keyring_error,
        )

    def _on_keyring_status(self, status) -> None:
        if status.usable:
            self.keyring.setText(f"usable ({status.backend})")
        else:
            self.keyring.setText(f"⚠ not usable: {status.reason} ({status.backend})")
        self.keyring.setToolTip(status.backend)

    def _on_keyring_error(self, message: str) -> None:
        self.keyring.setText(f"⚠ could not be checked: {message}")

    # --- result -------------------------------------------------------------------------

    def edited(self) -> AppSettings:
        return self.settings.model_copy(
            update={
                "sample_hz": round(self.sample_hz.value(), 1),
                "window_s": float(self.window.currentData()),
                "theme": Theme(self.theme.currentData()),
                "start_at_login": self.start_at_login.isChecked(),
            }
        )

    def accept(self) -> None:
        self.settings_accepted.emit(AppSettings.model_validate(self.edited().model_dump()))
        super().accept()
