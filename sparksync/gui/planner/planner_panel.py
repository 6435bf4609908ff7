"""The Planner tab: "will it fit, and how fast can it go" for a model file or numbers typed in.

The model's numbers come from its files (GGUF header, or safetensors index
plus config.json) when a path is given, otherwise from the fields. Reading
files and planning run in a worker; the answer is one sentence plus a row
per cluster size: fits, memory per node, margin, and the decode and prefill
bounds at the chosen context.
"""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.planner import QUANTS, FitOptions, Hardware, ModelSpec, PlanInputError, stated_cluster
from sparksync.core.planner import DEFAULT_OVERHEAD_GB, GB, KV_DTYPES, MAX_NODES
from sparksync.gui.planner.answer import PlannerAnswer, answer, answer_for_file, verdict
from sparksync.gui.workers import Jobs

COLUMNS = ("nodes", "fits", "needed per node", "margin", "tensor parallel", "decode bound", "prefill bound",
           "bound model")
SPLIT_CHOICES = {"tensor parallel (vLLM, SGLang, TRT-LLM)": "tensor", "layer split (llama.cpp RPC)": "layer",
                 "one-node replicas": "replica"}  # fmt: skip
_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
DEFAULT_RESERVE_GB = 4.0  # the OS and its desktop, as `sparksync plan` assumes


class PlannerPanel(QWidget):
    answered = Signal(object)  # PlannerAnswer
    error_raised = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("plannerPanel")
        self.jobs = Jobs(self)
        self.answer: PlannerAnswer | None = None
        self._fields()
        self._layout()

    def _fields(self) -> None:
        self.model_file = QLineEdit(self)
        self.model_file.setPlaceholderText("a .gguf file, or a folder with safetensors and config.json (optional)")
        self.name = QLineEdit(self)
        self.params = QLineEdit("27B", self)
        self.quant = QComboBox(self)
        self.quant.addItems(sorted(QUANTS))
        self.quant.setCurrentText("nvfp4")
        self.weights_gb = _spin(self, 0, 10_000, 0, "computed from parameters")
        self.layers, self.kv_heads = _int(self, 0, 1000), _int(self, 0, 1000)
        self.head_dim, self.hidden = _int(self, 0, 100_000), _int(self, 0, 1_000_000)
        self.context = _int(self, 1, 10_000_000, 8192)
        self.concurrency = _int(self, 1, 4096, 1)
        self.prompt = _int(self, 1, 10_000_000, 8192)
        self.kv_dtype = QComboBox(self)
        self.kv_dtype.addItems(list(KV_DTYPES))
        self.kv_dtype.setCurrentText("bf16")
        self.nodes = _int(self, 1, MAX_NODES, MAX_NODES)
        self.split = QComboBox(self)
        self.split.setObjectName("plannerSplit")
        self.split.addItems(list(SPLIT_CHOICES))
        self.memory_gb = _spin(self, 1, 10_000, 128)
        self.reserve_gb = _spin(self, 0, 10_000, DEFAULT_RESERVE_GB)
        self.bandwidth = _spin(self, 1, 100_000, 273)
        self.link = _spin(self, 1, 100_000, 200)
        self.verdict = QLabel("Give a model and press Plan.", self)
        self.verdict.setObjectName("plannerVerdict")
        self.verdict.setWordWrap(True)
        self.notes = QLabel("", self)
        self.notes.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        # A tab of its own is wide enough for every heading in full ("needed per node" was clipped).
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.horizontalHeader().setMinimumSectionSize(90)

    def _layout(self) -> None:
        browse = QPushButton("Browse…", self)
        browse.clicked.connect(self._on_browse_clicked)
        file_row = QHBoxLayout()
        file_row.addWidget(self.model_file, 1)
        file_row.addWidget(browse)
        form = QFormLayout()
        for text, field in (("Model files", file_row), ("Name", self.name), ("Parameters (e.g. 27B, 753e9)",
                            self.params), ("Quantisation", self.quant), ("Weights GB", self.weights_gb),
                            ("Layers", self.layers), ("KV heads", self.kv_heads), ("Head dim", self.head_dim),
                            ("Hidden size", self.hidden), ("Context tokens", self.context),
                            ("Concurrency", self.concurrency), ("Prompt tokens (prefill)", self.prompt),
                            ("KV cache type", self.kv_dtype), ("Nodes", self.nodes), ("Split", self.split),
                            ("Memory per node GB", self.memory_gb), ("Reserved per node GB", self.reserve_gb),
                            ("Memory bandwidth GB/s per node", self.bandwidth), ("Link Gb/s", self.link)):
            form.addRow(text, field)
        self.plan_button = QPushButton("Plan", self)
        self.plan_button.clicked.connect(self.plan)
        left = QVBoxLayout()
        left.addLayout(form)
        left.addWidget(self.plan_button)
        left.addStretch(1)
        right = QVBoxLayout()
        right.addWidget(self.verdict)
        right.addWidget(self.table, 1)
        right.addWidget(self.notes)
        row = QHBoxLayout(self)
        row.addLayout(left, 2)
        row.addLayout(right, 3)

    def _on_browse_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "The model's GGUF or config.json", "",
                                              "Models (*.gguf config.json *.safetensors)")
        if path:
            self.model_file.setText(str(Path(path).parent) if path.endswith(".json") else path)

    # --- planning ---------------------------------------------------------------------

    def plan(self) -> None:
        try:
            inputs = self._inputs()
        except PlanInputError as exc:
            self._on_plan_failed(str(exc))
            return
        path, model, cluster, options, hardware, prompt = inputs
        split = SPLIT_CHOICES[self.split.currentText()]
        if path is not None:
            call = lambda: answer_for_file(path, cluster, options, hardware, prompt, split)
        else:
            call = lambda: answer(model, cluster, options, hardware, prompt, split)
        self.verdict.setText("Planning…")
        self.jobs.run("planner", call, self._on_answered, self._on_plan_failed)

    def _inputs(self):
        text = self.model_file.text().strip()
        path = Path(text).expanduser() if text else None
        model = None if path is not None else self.model_spec()
        cluster = stated_cluster(self.nodes.value(), self.memory_gb.value(), self.reserve_gb.value())
        options = FitOptions(context=self.context.value(), concurrency=self.concurrency.value(),
                             kv_dtype=self.kv_dtype.currentText(), overhead_bytes=DEFAULT_OVERHEAD_GB * GB)
        hardware = Hardware(memory_bandwidth_gbs=self.bandwidth.value(), link_gbps=self.link.value())
        return path, model, cluster, options, hardware, self.prompt.value()

    def model_spec(self) -> ModelSpec:
        shape = {"layers": self.layers.value(), "kv_heads": self.kv_heads.value(),
                 "head_dim": self.head_dim.value(), "hidden": self.hidden.value()}
        weights = int(self.weights_gb.value() * GB) or None
        return ModelSpec.build(name=self.name.text().strip() or None, params=parse_count(self.params.text()),
                               quant=self.quant.currentText(), weight_bytes=weights,
                               **{k: v for k, v in shape.items() if v})

    def _on_answered(self, result: PlannerAnswer) -> None:
        self.answer = result
        self.verdict.setText(verdict(result))
        self.notes.setText("\n".join(_for_fields(n) for n in result.report.warnings + result.notes))
        self.table.setRowCount(len(result.rows))
        for r, row in enumerate(result.rows):
            for c, text in enumerate(row_texts(row)):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        self.answered.emit(result)

    def _on_plan_failed(self, message: str) -> None:
        self.verdict.setText(message)
        self.error_raised.emit(message)


def row_texts(row) -> list[str]:
    tp = {True: "even split", False: "uneven heads", None: "—"}[row.tensor_parallel_ok]
    return [str(row.nodes), "yes" if row.fits else "no", f"{row.needed_bytes_per_node / GB:,.1f} GB",
            f"{row.margin_bytes / GB:+,.1f} GB", tp, _tps(row.decode_tps), _tps(row.prefill_tps), row.bound_model]


def parse_count(text: str) -> float:
    """753e9, 753B, 27b, 1.5T -> a number; anything else is a PlanInputError."""
    match = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*([kmbgt]?)\s*", text, re.IGNORECASE)
    try:
        number = float(match.group(1)) * _SUFFIX[match.group(2).lower()] if match else 0.0
    except ValueError:
        number = 0.0
    if number <= 0:
        raise PlanInputError(f"{text!r} is not a parameter count; write it as 27B, 753e9 or 1.5T")
    return number


def _for_fields(note: str) -> str:
    """The planner names the CLI's options (--layers); here they are the fields of the same names."""
    return re.sub(r"--([a-z-]+)", lambda m: m.group(1).replace("-", " "), note)


def _tps(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f} tok/s"


def _int(parent: QWidget, low: int, high: int, value: int = 0) -> QSpinBox:
    spin = QSpinBox(parent)
    spin.setRange(low, high)
    spin.setValue(value)
    if low == 0:
        spin.setSpecialValueText("unknown")
    return spin


def _spin(parent: QWidget, low: float, high: float, value: float, zero_text: str = "") -> QDoubleSpinBox:
    spin = QDoubleSpinBox(parent)
    spin.setRange(low, high)
    spin.setDecimals(1)
    spin.setValue(value)
    if zero_text:
        spin.setSpecialValueText(zero_text)
    return spin
