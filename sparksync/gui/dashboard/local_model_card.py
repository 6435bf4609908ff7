"""The dashboard's "Run a model on this computer": a GGUF (or the demo model), started here, tokens/s live.

A newcomer with no Spark picks a GGUF file (or lets SparkSync write its tiny
demo model), presses Start, and the model runs on this computer through its
local agent, the way a node runs it; once it is ready the card makes it
answer for a while, so the tokens/s plot moves at once. Where llama.cpp is
missing, "Install llama.cpp" builds it here with a progress bar.

Every step is a core call (``sparksync.core.workloads.local_model`` and
``WorkloadControl``) in a worker; the card only shows what comes back.
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.agents import LOCAL_NODE_NAME
from sparksync.core.workloads import (
    EngineHere,
    Generated,
    InstallProgress,
    Progress,
    WorkloadControl,
    WorkloadView,
    engine_here,
    generate_for,
    start_here,
    url_of,
)
from sparksync.gui.workers import Jobs

GGUF_FILTER = "GGUF models (*.gguf);;All files (*)"
GENERATE_S = 30.0  # how long the card makes a freshly started model answer
ERROR_STYLE = "color: #c0392b"


class _Bridge(QObject):
    """Progress from a worker, brought to the GUI thread by queued signals."""

    progressed = Signal(object)  # Progress of the start
    installing = Signal(object)  # InstallProgress of the engine build


class LocalModelCard(QFrame):
    engine_shown = Signal(bool)  # llama.cpp is (True) or is not on this computer
    started = Signal(object)  # WorkloadView, once the model is ready
    generated = Signal(object)  # Generated, once a generating spell ends
    stopped = Signal(str)  # workload id
    error_raised = Signal(str)
    status_message = Signal(str)

    def __init__(self, control: WorkloadControl, parent: QWidget | None = None, *, generate_s: float = GENERATE_S):
        super().__init__(parent)
        self.setObjectName("localModel")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.control = control
        self.generate_s = generate_s
        self.jobs = Jobs(self)
        self.jobs.error_raised.connect(self._on_jobs_error_raised)
        self.view: WorkloadView | None = None  # the model this card started, while it runs
        self._generating: threading.Event | None = None  # set to stop the answers
        self._install_cancel: threading.Event | None = None
        self._shut = False
        self._bridge = _Bridge(self)
        self._bridge.progressed.connect(self._on_bridge_progressed)
        self._bridge.installing.connect(self._on_bridge_installing)
        self._build()

    def _build(self) -> None:
        title = QLabel("<b>Run a model on this computer</b>", self)
        hint = QLabel("Start a small model on this computer's CPU and watch its tokens/s live below.", self)
        self.engine = QLabel("llama.cpp on this computer: checking…", self, objectName="localEngine")
        self.install = QPushButton("Install llama.cpp", self, objectName="localInstall", visible=False)
        self.install.setToolTip("Build llama.cpp here, as `sparksync engine install llama.cpp --node local` does.")
        self.progress = QProgressBar(self, objectName="localInstallProgress", visible=False)
        self.progress.setRange(0, 100)
        self.model = QLineEdit(self, objectName="localModelPath")
        self.model.setPlaceholderText("a .gguf model file on this computer")
        self.browse = QPushButton("Browse…", self, objectName="localBrowse")
        self.demo = QPushButton("Use the demo model", self, objectName="localDemo")
        self.demo.setToolTip("A tiny random model SparkSync writes itself (about 1 MB): it answers gibberish, fast.")
        self.start_button = QPushButton("Start", self, objectName="localStart")
        self.stop_button = QPushButton("Stop", self, objectName="localStop", enabled=False)
        self.generate = QPushButton("Generate", self, objectName="localGenerate", enabled=False)
        self.generate.setCheckable(True)
        self.generate.setToolTip(f"Ask the model for answers for {self.generate_s:.0f} s, so its tokens/s shows.")
        self.status = QLabel("", self, objectName="localStatus", wordWrap=True)
        head = QHBoxLayout()
        for widget in (title, hint):
            head.addWidget(widget)
        head.addStretch(1)
        head.addWidget(self.engine)
        head.addWidget(self.install)
        head.addWidget(self.progress)
        row = QHBoxLayout()
        row.addWidget(self.model, 1)
        for widget in (self.browse, self.demo, self.start_button, self.stop_button, self.generate):
            row.addWidget(widget)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        layout.addLayout(head)
        layout.addLayout(row)
        layout.addWidget(self.status)
        self.browse.clicked.connect(self._on_browse_clicked)
        self.demo.clicked.connect(self.use_demo_model)
        self.start_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(self.stop)
        self.generate.toggled.connect(self._on_generate_toggled)
        self.install.clicked.connect(self.install_engine)

    # --- the engine -------------------------------------------------------------------------

    def check_engine(self) -> None:
        """Ask this computer's agent whether llama.cpp is there (in a worker)."""
        if not self._shut:
            self.jobs.run("Checking llama.cpp on this computer", lambda: engine_here(self.control),
                          self._on_engine_read)  # fmt: skip

    def _on_engine_read(self, found: EngineHere) -> None:
        text = f"llama.cpp: {'ready' if found.present else 'missing'}"
        self.engine.setText(text)
        self.engine.setToolTip(found.detail)
        self.engine.setStyleSheet("" if found.present else ERROR_STYLE)
        self.install.setVisible(not found.present)
        self.engine_shown.emit(found.present)

    def install_engine(self) -> bool:
        if self._install_cancel is not None or self._shut:
            return False
        cancel = self._install_cancel = threading.Event()
        self.install.setEnabled(False)
        self.progress.setVisible(True)
        self.progress.setValue(0)
        self.status_message.emit("Installing llama.cpp on this computer…")

        def work() -> str:
            return self.control.install_engine(LOCAL_NODE_NAME, self._bridge.installing.emit, cancel=cancel)

        self.jobs.run("Installing llama.cpp on this computer", work, self._on_installed, self._on_install_failed)
        return True

    def _on_bridge_installing(self, progress: InstallProgress) -> None:
        if progress.percent is not None:
            self.progress.setValue(int(progress.percent))
        self.progress.setFormat(f"{progress.step} %p%")

    def _on_installed(self, where: str) -> None:
        self._install_cancel = None
        self.progress.setValue(100)
        self.progress.setVisible(False)
        self.install.setEnabled(True)
        self._say(f"llama.cpp installed in {where}.")
        self.check_engine()

    def _on_install_failed(self, message: str) -> None:
        self._install_cancel = None
        self.progress.setVisible(False)
        self.install.setEnabled(True)
        self._say(message, error=True)

    # --- the model ---------------------------------------------------------------------------

    def pick_model(self, path: str | Path) -> None:
        """Use ``path`` (what the file dialog, or the demo model, gives)."""
        if str(path):
            self.model.setText(str(path))

    def _on_browse_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Pick a GGUF model file", self.model.text(), GGUF_FILTER)
        if path:
            self.pick_model(path)

    def use_demo_model(self) -> None:
        """Write SparkSync's tiny demo model (once, in a worker) and pick it."""
        from sparksync.core.engines import write_demo_model

        self.jobs.run("Writing the demo model", write_demo_model, self.pick_model)

    def start(self) -> bool:
        """Start the picked model on this computer (in a worker); it answers for a while once ready."""
        path = self.model.text().strip()
        if self._shut or self.view is not None or not self.start_button.isEnabled():
            return False
        if not path:
            self._say("Pick a .gguf model file, or press \u201cUse the demo model\u201d.", error=True)
            return False
        self.start_button.setEnabled(False)
        self._say(f"Starting {Path(path).name} on this computer…")

        def work() -> WorkloadView:
            return start_here(self.control, path, self._bridge.progressed.emit)

        self.jobs.run("Starting the model on this computer", work, self._on_started, self._on_start_failed)
        return True

    def _on_bridge_progressed(self, event: Progress) -> None:
        if self.view is None:
            self.status.setText(event.message)

    def _on_started(self, view: WorkloadView) -> None:
        self.view = view
        self.stop_button.setEnabled(True)
        self.generate.setEnabled(True)
        self._say(f"{view.workload_id} is ready at {url_of(view)}; it answers for {self.generate_s:.0f} s now, "
                  "and its tokens/s shows below.")  # fmt: skip
        self.started.emit(view)
        self.generate.setChecked(True)

    def _on_start_failed(self, message: str) -> None:
        self.start_button.setEnabled(True)
        self._say(message, error=True)

    def _on_generate_toggled(self, on: bool) -> None:
        if not on:
            if self._generating is not None:
                self._generating.set()
            return
        if self.view is None or self._generating is not None or self._shut:
            self.generate.setChecked(False)
            return
        stop = self._generating = threading.Event()
        url, seconds = url_of(self.view), self.generate_s
        self.generate.setText("Stop generating")
        self.jobs.run("Generating on this computer", lambda: generate_for(url, seconds, stop),
                      self._on_generated, self._on_generate_failed)  # fmt: skip

    def _on_generated(self, done: Generated) -> None:
        self._generating = None
        self.generate.setText("Generate")
        self.generate.setChecked(False)
        rate = f", {done.tokens_per_s:,.0f} tok/s in its last answer" if done.tokens_per_s else ""
        self._say(f"{done.answers} answers, {done.tokens:,} tokens{rate}.")
        self.generated.emit(done)

    def _on_generate_failed(self, message: str) -> None:
        self._generating = None
        self.generate.setText("Generate")
        self.generate.setChecked(False)
        self._say(message, error=True)

    def stop(self) -> None:
        """Stop the model this card started, and drop it from the list."""
        if self.view is None:
            return
        workload_id = self.view.workload_id
        if self._generating is not None:
            self._generating.set()
        self.stop_button.setEnabled(False)
        self.jobs.run(f"Stopping {workload_id}", lambda: self.control.remove(workload_id),
                      lambda _r: self._on_stopped(workload_id), self._on_stop_failed)  # fmt: skip

    def _on_stopped(self, workload_id: str) -> None:
        self.view = None
        self.generate.setEnabled(False)
        self.start_button.setEnabled(True)
        self._say(f"{workload_id} stopped.")
        self.stopped.emit(workload_id)

    def _on_stop_failed(self, message: str) -> None:
        self.stop_button.setEnabled(True)
        self._say(message, error=True)

    # --- the rest ----------------------------------------------------------------------------

    def shutdown(self) -> None:
        """The app is quitting: stop generating and any install; nothing new starts."""
        self._shut = True
        for event in (self._generating, self._install_cancel):
            if event is not None:
                event.set()

    def _say(self, text: str, *, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet(ERROR_STYLE if error else "")
        if not error:
            self.status_message.emit(text)

    def _on_jobs_error_raised(self, message: str) -> None:
        self.error_raised.emit(message.splitlines()[0] if message else message)
