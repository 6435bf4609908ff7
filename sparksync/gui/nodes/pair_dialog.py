"""The pair dialog: host, user and password; the host key's fingerprint confirmed before the password is used.

1. "Check host key" starts a ``PairingSession`` (core) in a worker: it reads
   the node's host key without logging in, and cross-checks it with what
   the node advertised over mDNS (when opened from a discovered node). A
   mismatch stops here, shown as a warning.
2. The fingerprint is shown with "Trust and pair" and "Don't trust".
3. "Trust and pair" takes the password from its field, clears the field at
   once, and hands it to the session; the worker logs in once, installs
   this computer's key and records the node. "Don't trust" (or closing the
   dialog) refuses: nothing is changed anywhere.

Errors are shown in the dialog in plain words; the dialog stays open so the
user can correct the host, user or password and try again.
"""

from __future__ import annotations

import getpass
import logging
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from sparksync.gui.workers import Jobs

if TYPE_CHECKING:  # the SSH stack loads with the first pairing, not with the window
    from sparksync.core.discovery import DiscoveredNode
    from sparksync.core.nodes import PairFunction, PairingSession
    from sparksync.core.ssh import PairRequest

log = logging.getLogger(__name__)

CHECK_KEY_HINT = "Check it on the node before you trust it: ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub"


class PairDialog(QDialog):
    fingerprint_received = Signal(str)  # from the worker thread
    progress_received = Signal(str)  # from the worker thread
    pairing_started = Signal(str)  # the node list's key for this pairing
    pairing_ended = Signal(str)
    paired = Signal(object)  # PairResult
    deploy_requested = Signal(str)  # the paired node's name: "Deploy agent" was pressed

    def __init__(
        self,
        pair: PairFunction,
        discovered: DiscoveredNode | None = None,
        parent: QWidget | None = None,
        jobs: Jobs | None = None,
    ):
        super().__init__(parent)
        self.setWindowTitle("Pair a node")
        self.setObjectName("pairDialog")
        self.setMinimumWidth(520)
        self._pair = pair
        self._discovered = discovered
        self.jobs = jobs or Jobs(self)  # the window's, so quitting waits for a pairing to end
        self.session: PairingSession | None = None
        self.paired_name: str | None = None  # once paired: the node Deploy installs the agent on
        self._key = ""
        self._build()
        self.fingerprint_received.connect(self._on_session_fingerprint)
        self.progress_received.connect(self._on_session_progress)
        self._show_step("form")

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        form = QFormLayout()
        self.host = QLineEdit(self._default_host(), self)
        self.host.setObjectName("host")
        self.host.setPlaceholderText("spark-1a2b.local or 192.168.1.20")
        self.user = QLineEdit(getpass.getuser(), self)
        self.user.setObjectName("user")
        self.port = QSpinBox(self)
        self.port.setRange(1, 65535)
        self.port.setValue(self._discovered.ssh_port if self._discovered else 22)
        self.name = QLineEdit(self)
        self.name.setObjectName("name")
        self.name.setPlaceholderText("default: the node's hostname")
        self.password = QLineEdit(self)
        self.password.setObjectName("password")
        self.password.setEchoMode(QLineEdit.EchoMode.Password)
        self.password.setPlaceholderText("used once, after you trust the host key; never stored")
        for label, widget in (("Host", self.host), ("User", self.user), ("SSH port", self.port),
                              ("Name", self.name), ("Password", self.password)):  # fmt: skip
            form.addRow(f"{label}:", widget)
        layout.addLayout(form)
        self.fingerprint = QLabel("", self)
        self.fingerprint.setObjectName("fingerprint")
        self.fingerprint.setWordWrap(True)
        self.fingerprint.setTextInteractionFlags(
            self.fingerprint.textInteractionFlags() | Qt.TextInteractionFlag.TextSelectableByMouse
        )
        layout.addWidget(self.fingerprint)
        self.progress = QLabel("", self)
        self.progress.setObjectName("progress")
        self.progress.setWordWrap(True)
        layout.addWidget(self.progress)
        self.error = QLabel("", self)
        self.error.setObjectName("error")
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #c0392b")
        layout.addWidget(self.error)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.check_button = self._button(buttons, "Check host key", "checkButton", self.start)
        self.trust_button = self._button(buttons, "Trust and pair", "trustButton", self.trust)
        self.refuse_button = self._button(buttons, "Don't trust", "refuseButton", self.refuse)
        self.deploy_button = self._button(buttons, "Deploy agent", "deployButton", self._on_deploy_button_clicked)
        self.deploy_button.setToolTip("Install SparkSync's agent on the node now (its progress shows in the Nodes tab)")
        self.close_button = self._button(buttons, "Close", "closeButton", self.reject)
        layout.addLayout(buttons)

    def _button(self, layout: QHBoxLayout, text: str, name: str, slot) -> QPushButton:
        button = QPushButton(text, self)
        button.setObjectName(name)
        button.setAutoDefault(False)
        button.clicked.connect(slot)
        layout.addWidget(button)
        return button

    def _default_host(self) -> str:
        node = self._discovered
        if node is None:
            return ""
        from sparksync.core.discovery import is_ip  # loaded with the node it describes

        # As PairRequest.from_discovered picks it: the name, or the first address when the name is one.
        return node.addresses[0] if is_ip(node.hostname) and node.addresses else node.hostname

    # --- steps --------------------------------------------------------------------------

    def _show_step(self, step: str) -> None:
        """form: typing; checking: reading the key; confirm: asking; pairing: logging in; paired: done,
        Deploy offered."""
        typing = step == "form"
        for widget in (self.host, self.user, self.port, self.name):
            widget.setEnabled(typing)
        self.password.setEnabled(step in ("form", "checking", "confirm"))
        self.check_button.setVisible(typing)
        self.trust_button.setVisible(step == "confirm")
        self.refuse_button.setVisible(step == "confirm")
        self.deploy_button.setVisible(step == "paired")
        if step == "confirm":
            self.trust_button.setDefault(True)
        if step == "paired":
            self.deploy_button.setDefault(True)
            self.close_button.setText("Later")

    def start(self) -> bool:
        host, user = self.host.text().strip(), self.user.text().strip()
        if not host or not user:
            self._show_error("Type the node's host name or address and the user to log in as.")
            return False
        from sparksync.core.nodes import PairingSession

        request = self._request(host, user)
        self.error.clear()
        self.fingerprint.clear()
        self.progress.setText(f"Reading the host key of {host}…")
        self.session = PairingSession(
            request,
            on_fingerprint=self.fingerprint_received.emit,
            on_progress=self.progress_received.emit,
            pair=self._pair,
        )
        self._key = self._discovered.key if self._discovered is not None else host
        self.pairing_started.emit(self._key)
        self._show_step("checking")
        session = self.session
        self.jobs.run(f"Pairing {host}", session.run, self._on_job_done, self._on_job_error)
        return True

    def _request(self, host: str, user: str) -> PairRequest:
        from sparksync.core.ssh import PairRequest

        name = self.name.text().strip() or None
        node = self._discovered
        advertised = dict(node.host_key_fingerprints) if node is not None else {}
        return PairRequest(host, user, self.port.value(), name, advertised)

    @Slot(str)
    def _on_session_fingerprint(self, fingerprint: str) -> None:
        host = self.session.request.host if self.session else self.host.text()
        self.fingerprint.setText(
            f"The host key of {host} has the SHA-256 fingerprint\n{fingerprint}\n{CHECK_KEY_HINT}"
        )
        self.progress.setText("Trust this key? The password is used only once you do.")
        self._show_step("confirm")

    @Slot(str)
    def _on_session_progress(self, line: str) -> None:
        self.progress.setText(line)

    def trust(self) -> bool:
        if self.session is None:
            return False
        if not self.password.text():
            self._show_error("Type the password of the user on the node; it is used once and never stored.")
            return False
        password = self.password.text()
        self.password.clear()  # the field forgets it at once; only the session holds it, until paramiko takes it
        self.error.clear()
        self.progress.setText("Logging in and installing this computer's key…")
        self._show_step("pairing")
        self.session.accept(password)
        del password
        return True

    def refuse(self) -> None:
        self.password.clear()
        if self.session is not None:
            self.session.refuse()
        self._show_step("pairing")

    # --- outcome ------------------------------------------------------------------------

    def _on_job_done(self, result) -> None:
        self._end()
        self.paired_name = result.node.name
        self.paired.emit(result)
        for widget in (self.host, self.user, self.port, self.name, self.password):
            widget.setEnabled(False)
        self.fingerprint.clear()
        if result.already_paired:
            self.progress.setText(f"{result.node.host} is already paired as {result.node.name!r}.")
        else:
            self.progress.setText(f"Paired {result.node.name!r}. Next, install SparkSync's agent on it: it "
                                  "streams the node's telemetry and runs its workloads.")  # fmt: skip
        self._show_step("paired")

    def _on_deploy_button_clicked(self) -> None:
        if self.paired_name is not None:
            self.deploy_requested.emit(self.paired_name)
        self.accept()

    def _on_job_error(self, message: str) -> None:
        self._end()
        self.progress.clear()
        self._show_error(message)

    def _show_error(self, message: str) -> None:
        self.error.setText(f"⚠ {message}")
        self.error.setToolTip(message)

    def _end(self) -> None:
        self.password.clear()
        self.session = None
        self.pairing_ended.emit(self._key)
        self._show_step("form")

    # --- closing ------------------------------------------------------------------------

    def done(self, code: int) -> None:
        self.password.clear()
        if self.session is not None:
            self.session.cancel()  # a worker waiting for the answer gets "no"; nothing is changed
        super().done(code)

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.session is not None:
            self.session.cancel()
        super().closeEvent(event)
