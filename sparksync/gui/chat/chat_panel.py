"""The Chat tab: pick a running model (or a Switchyard gateway), ask, and watch the answer stream in.

The targets come from what the app already reads: the Workloads tab's
rows (each running workload's endpoints) and the Switchyard tab's gateways
(``set_workload_rows``, ``set_gateways``). A message is sent in a worker
(``Jobs``) through the target's tunnel (the fleet's, as workloads use it;
this computer's engines on loopback); each piece of the answer crosses to
the GUI thread as a signal and is appended where the answer grows. When it
ends, its time to first token and tokens/s show under it. Errors (engine
gone, tunnel down, a refusal) show in the tab, under the question they
answer, and reach the status bar.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut, QTextCursor
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.chat import Conversation
from sparksync.core.chat import Answer, stream_answer
from sparksync.core.chat import ChatTarget, Reach, gateway_target, opened, workload_targets
from sparksync.gui.workers import Jobs

NO_TARGET = (
    "Nothing to chat with yet: start a model in the Workloads tab (or \"Run a model on this computer\" on "
    "the dashboard), or a Switchyard gateway; it is listed here once it runs."
)
STOP_WAIT_S = 10.0


class _Pieces(QObject):
    arrived = Signal(str)  # a piece of the answer, from the worker thread


class ChatPanel(QWidget):
    answered = Signal(object)  # the Answer, once it ended
    failed = Signal(str)  # why a message got no answer
    targets_changed = Signal(list)  # ChatTarget
    status_message = Signal(str)
    error_raised = Signal(str)

    def __init__(self, reach: Callable[[], Reach] | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("chatPanel")
        self.reach = reach  # the fleet's tunnels to a node's endpoint (made when first needed)
        self.jobs = Jobs(self)
        self.conversation = Conversation()
        self.targets: list[ChatTarget] = []
        self._workloads: list[ChatTarget] = []
        self._gateways: list[ChatTarget] = []
        self._cancel: threading.Event | None = None
        self._pieces = _Pieces(self)
        self._pieces.arrived.connect(self._on_piece)
        self._growing = ""  # the answer streaming in
        self._build()
        self._show_targets()

    def _build(self) -> None:
        self.target_box = QComboBox(self, objectName="chatTarget")
        self.target_box.currentIndexChanged.connect(self._on_target_box_changed)
        self.clear_button = QPushButton("New chat", self, objectName="newChat")
        self.clear_button.clicked.connect(self.new_chat)
        top = QHBoxLayout()
        top.addWidget(QLabel("Chat with:", self))
        top.addWidget(self.target_box, 1)
        top.addWidget(self.clear_button)
        self.hint = QLabel(NO_TARGET, self, objectName="chatHint")
        self.hint.setWordWrap(True)
        self.transcript = QTextBrowser(self, objectName="chatTranscript")
        self.transcript.setOpenLinks(False)
        self.live = QLabel("", self, objectName="chatLive")  # the answer while it streams
        self.live.setWordWrap(True)
        self.live.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.live.hide()
        self.input = QPlainTextEdit(self, objectName="chatInput")
        self.input.setPlaceholderText("Ask the model something… (Ctrl+Enter sends)")
        self.input.setMaximumHeight(90)
        self.send_button = QPushButton("Send", self, objectName="chatSend")
        self.send_button.clicked.connect(lambda: self.send())
        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            QShortcut(QKeySequence(keys), self.input, activated=lambda: self.send())
        self.stop_button = QPushButton("Stop", self, objectName="chatStop")
        self.stop_button.clicked.connect(self.stop)
        self.stop_button.setEnabled(False)
        bottom = QHBoxLayout()
        bottom.addWidget(self.input, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        bottom.addLayout(buttons)
        column = QVBoxLayout(self)
        column.addLayout(top)
        column.addWidget(self.hint)
        column.addWidget(self.transcript, 1)
        column.addWidget(self.live)
        column.addLayout(bottom)

    # --- targets ----------------------------------------------------------------------------

    def set_workload_rows(self, rows: list) -> None:
        """The Workloads tab's latest reading: its running endpoints are targets."""
        targets = workload_targets(rows)
        if targets != self._workloads:
            self._workloads = targets
            self._show_targets()

    def set_gateways(self, readings: list) -> None:
        """The Switchyard tab's gateways; one launched as a workload is already a workload target."""
        targets = [gateway_target(r.key, r.label, r.url) for r in readings
                   if r.url and r.origin != "workload" and r.problem is None]  # fmt: skip
        if targets != self._gateways:
            self._gateways = targets
            self._show_targets()

    def _show_targets(self) -> None:
        chosen = self.target()
        self.targets = [*self._workloads, *self._gateways]
        self.target_box.blockSignals(True)
        self.target_box.clear()
        for target in self.targets:
            self.target_box.addItem(target.label, target.key)
        keys = [t.key for t in self.targets]
        if chosen is not None and chosen.key in keys:
            self.target_box.setCurrentIndex(keys.index(chosen.key))
        self.target_box.blockSignals(False)
        self.hint.setVisible(not self.targets)
        self._update_buttons()
        if self.target() is not None and (chosen is None or chosen.key != self.target().key):
            self._on_target_box_changed(self.target_box.currentIndex())
        self.targets_changed.emit(self.targets)

    def target(self) -> ChatTarget | None:
        index = self.target_box.currentIndex()
        return self.targets[index] if 0 <= index < len(self.targets) else None

    def choose(self, key: str) -> bool:
        keys = [t.key for t in self.targets]
        if key not in keys:
            return False
        self.target_box.setCurrentIndex(keys.index(key))
        return True

    def _on_target_box_changed(self, _index: int) -> None:
        target = self.target()
        if target is not None and target.key != self.conversation.target_key:
            self.new_chat()

    def new_chat(self) -> None:
        target = self.target()
        self.conversation.clear(target.key if target is not None else None)
        self.transcript.clear()
        if target is not None:
            self._append(f"<p style='color:#888'>Chatting with <b>{html.escape(target.label)}</b>.</p>")

    # --- sending ----------------------------------------------------------------------------

    def busy(self) -> bool:
        return self._cancel is not None

    def send(self, text: str | None = None) -> bool:
        """Send ``text`` (default: what is typed) to the chosen target; False when it cannot go now."""
        question = (text if text is not None else self.input.toPlainText()).strip()
        target = self.target()
        if not question or target is None or self.busy():
            return False
        self.input.clear()
        messages = self.conversation.ask(question)
        self._append(f"<p><b>You:</b> {_html(question)}</p>")
        cancel = self._cancel = threading.Event()
        self._growing = ""
        self.live.setText("…")
        self.live.show()
        self._update_buttons()
        reach, pieces = self.reach, self._pieces.arrived

        def work() -> Answer:
            with opened(target, reach) as url:
                return stream_answer(url, messages, on_text=pieces.emit, cancel=cancel, where=target.label)

        self.jobs.run(f"Asking {target.label}", work, self._on_answered, self._on_failed)
        return True

    def stop(self) -> None:
        if self._cancel is not None:
            self._cancel.set()

    def shutdown(self, timeout: float = STOP_WAIT_S) -> bool:
        self.stop()
        return self.jobs.wait(timeout)

    def _on_piece(self, piece: str) -> None:
        self._growing += piece
        self.live.setText(f"<b>{html.escape(self.target().label if self.target() else 'Model')}:</b> "
                          f"{_html(self._growing)}")  # fmt: skip

    def _on_answered(self, answer: Answer) -> None:
        self._cancel = None
        self.conversation.answered(answer)
        self.live.hide()
        self._append(f"<p><b>Model:</b> {_html(answer.text) or '<i>(no text)</i>'}<br>"
                     f"<span style='color:#76b900'>{html.escape(answer.figures())}</span></p>")  # fmt: skip
        self._update_buttons()
        self.status_message.emit(f"Answer: {answer.figures()}")
        self.answered.emit(answer)

    def _on_failed(self, message: str) -> None:
        self._cancel = None
        self.conversation.failed(message)
        self.live.hide()
        self._append(f"<p style='color:#c0392b'>⚠ {html.escape(message)}</p>")
        self._update_buttons()
        self.error_raised.emit(message)
        self.failed.emit(message)

    def _append(self, fragment: str) -> None:
        self.transcript.append(fragment)
        self.transcript.moveCursor(QTextCursor.MoveOperation.End)

    def _update_buttons(self) -> None:
        self.send_button.setEnabled(self.target() is not None and not self.busy())
        self.stop_button.setEnabled(self.busy())

    def transcript_text(self) -> str:
        return self.transcript.toPlainText()


def _html(text: str) -> str:
    return html.escape(text).replace("\n", "<br>")
