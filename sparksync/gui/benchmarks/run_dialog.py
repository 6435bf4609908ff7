"""The "Run benchmark" dialog: where the model is served, its tokenizer, and the profile.

The published profile (concurrency 1, pp 8192, tg 256, llama-benchy's runs
and warmup) is the default; "custom" takes lists of values as the CLI does.
The API key field is cleared as soon as the request is built.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.bench import (
    MAX_CLUSTER_SIZE,
    BenchInputError,
    BenchProfile,
    BenchRequest,
    Endpoint,
    RunContext,
)

DEFAULT_ENDPOINT = "http://127.0.0.1:8080/v1"
TOPOLOGIES = ("", "single", "direct", "ring", "switch")


class RunDialog(QDialog):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Run a benchmark")
        self.request: BenchRequest | None = None
        self.endpoint = QLineEdit(DEFAULT_ENDPOINT, self)
        self.model = QLineEdit(self)
        self.tokenizer = QLineEdit(self)
        self.api_key = QLineEdit(self)
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.profile = QComboBox(self)
        self.profile.addItems(["published", "custom"])
        self.pp, self.tg = QLineEdit("8192", self), QLineEdit("256", self)
        self.depth, self.concurrency = QLineEdit("0", self), QLineEdit("1", self)
        self.runs = QSpinBox(self)
        self.runs.setRange(0, 100)
        self.runs.setSpecialValueText("llama-benchy's default")
        self.nodes = QSpinBox(self)
        self.nodes.setRange(1, MAX_CLUSTER_SIZE)
        self.topology = QComboBox(self)
        self.topology.addItems(TOPOLOGIES)
        self.label = QLineEdit(self)
        self.problem = QLabel("", self)
        self.problem.setObjectName("runProblem")
        self.problem.setStyleSheet("color: #c0392b")
        self.problem.setWordWrap(True)
        self._layout()
        self.profile.currentTextChanged.connect(self._on_profile_current_text_changed)
        self._on_profile_current_text_changed(self.profile.currentText())

    def _layout(self) -> None:
        form = QFormLayout()
        browse = QPushButton("Browse…", self)
        browse.clicked.connect(self._on_browse_clicked)
        tokenizer_row = QHBoxLayout()
        tokenizer_row.addWidget(self.tokenizer, 1)
        tokenizer_row.addWidget(browse)
        for text, field in (("Endpoint (OpenAI API)", self.endpoint), ("Served model name", self.model),
                            ("Tokenizer (tokenizer.json or folder)", tokenizer_row), ("API key", self.api_key),
                            ("Profile", self.profile), ("Prompt tokens (pp)", self.pp),
                            ("Generated tokens (tg)", self.tg), ("Depth", self.depth),
                            ("Concurrency", self.concurrency), ("Runs", self.runs),
                            ("Nodes serving the model", self.nodes), ("Topology", self.topology),
                            ("Label", self.label)):
            form.addRow(text, field)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel,
                                   parent=self)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Run")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        column = QVBoxLayout(self)
        column.addLayout(form)
        column.addWidget(self.problem)
        column.addWidget(buttons)

    def _on_profile_current_text_changed(self, name: str) -> None:
        for field in (self.pp, self.tg, self.depth, self.concurrency, self.runs):
            field.setEnabled(name == "custom")

    def _on_browse_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "The model's tokenizer", "", "tokenizer.json (*.json)")
        if path:
            self.tokenizer.setText(path)

    def accept(self) -> None:
        try:
            self.request = self.build_request()
        except BenchInputError as exc:
            self.problem.setText(str(exc))
            return
        self.api_key.clear()  # the request holds it now; the field need not
        super().accept()

    def build_request(self) -> BenchRequest:
        """The request the fields describe; a BenchInputError says which field is wrong."""
        model, tokenizer = self.model.text().strip(), self.tokenizer.text().strip()
        if not model:
            raise BenchInputError("give the served model name, as the endpoint's /v1/models lists it")
        if not tokenizer:
            raise BenchInputError("give the model's tokenizer.json (or its folder); it is never fetched from a hub")
        endpoint = Endpoint.parse(self.endpoint.text(), self.api_key.text() or None)
        nodes = self.nodes.value()
        context = RunContext(cluster_size=nodes, topology=self.topology.currentText() or (
            "single" if nodes == 1 else None), label=self.label.text().strip() or None)
        return BenchRequest(endpoint, model, Path(tokenizer).expanduser(), self._profile(), context=context)

    def _profile(self) -> BenchProfile:
        if self.profile.currentText() == "published":
            return BenchProfile.published()
        return BenchProfile.build(pp=_ints(self.pp, "pp"), tg=_ints(self.tg, "tg"),
                                  depth=_ints(self.depth, "depth"), concurrency=_ints(self.concurrency, "concurrency"),
                                  runs=self.runs.value() or None)


def _ints(field: QLineEdit, name: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in field.text().replace(",", " ").split())
    except ValueError:
        raise BenchInputError(f"{name}: give whole numbers separated by commas, e.g. 512, 2048") from None
    if not values:
        raise BenchInputError(f"{name}: give at least one value")
    return values
