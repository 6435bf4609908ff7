"""The launch side of the Workloads panel: recipe, nodes in groups, model, memory check, per-rank progress.

Nodes are a checkable list (this computer and the paired nodes); their
order (drag to change it) is rank order, and the checked nodes are cut into
``replicas`` equal groups, each running one copy of the recipe over all its
own nodes. The model path is on the head node; "Browse…" picks a GGUF file
on this computer. Below it, the head node's llama.cpp: present, or missing
with "Install llama.cpp" and the build's progress. The form only gathers
the choice and shows results; the panel runs everything in workers.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
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
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from sparksync.core.base import SparkSyncError
from sparksync.core.planner import QUANTS
from sparksync.core.workloads import InstallProgress, LaunchChoice, Progress, Recipe, groups_of

MAX_REPLICAS = 8  # a cluster has at most 8 nodes
GGUF_FILTER = "GGUF models (*.gguf);;All files (*)"
PROGRESS_COLUMNS = ["Process", "Node", "Step"]
OK_STYLE, BAD_STYLE = "", "color: #c0392b"


class LaunchForm(QWidget):
    check_clicked = Signal()
    start_clicked = Signal()
    cancel_clicked = Signal()
    head_changed = Signal(object)  # the first checked node (str), or None
    install_clicked = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.recipes: dict[str, Recipe] = {}
        self.recipe = QComboBox(self, objectName="recipe")
        self.description = QLabel("", self, objectName="recipeDescription", wordWrap=True)
        self.nodes = QListWidget(self, objectName="nodes")
        self.nodes.setDragDropMode(QAbstractItemView.DragDropMode.InternalMove)  # order = rank order
        self.nodes.setMaximumHeight(150)
        self.replicas = QSpinBox(self, objectName="replicas", minimum=1, maximum=MAX_REPLICAS)
        self.groups = QLabel("", self, objectName="groups", wordWrap=True)
        self.model = QLineEdit(self, objectName="model")
        self.browse = QPushButton("Browse…", self, objectName="browseModel")
        self.browse.setToolTip("Pick a GGUF file on this computer (for a model that runs on this computer).")
        self.engine = QLabel("", self, objectName="engine", wordWrap=True)
        self.install = QPushButton("Install llama.cpp", self, objectName="installEngine", visible=False)
        self.install.setToolTip("Build llama.cpp on the head node, as `sparksync engine install` does (minutes).")
        self.install_progress = QProgressBar(self, objectName="installProgress", visible=False)
        self.install_progress.setRange(0, 100)
        self._head: str | None = None
        self.params = QDoubleSpinBox(self, objectName="params", minimum=0.0, maximum=10_000.0, decimals=1)
        self.params.setSpecialValueText("from the recipe")
        self.params.setSuffix(" B params")
        self.quant = QComboBox(self, objectName="quant")
        self.quant.addItems(list(QUANTS))
        self.quant.setCurrentText("bf16")
        self.check = QPushButton("Check memory", self, objectName="checkFit")
        self.start = QPushButton("Start", self, objectName="start")
        self.cancel = QPushButton("Cancel", self, objectName="cancel", enabled=False)
        self.fit = QLabel("", self, objectName="fit", wordWrap=True)
        self.fit.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress = QTableWidget(0, len(PROGRESS_COLUMNS), self, objectName="launchProgress")
        self.progress.setHorizontalHeaderLabels(PROGRESS_COLUMNS)
        self.progress.horizontalHeader().setStretchLastSection(True)
        self.progress.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.progress.verticalHeader().setVisible(False)
        self.progress.setWordWrap(False)
        self.progress.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self._layout()
        self.recipe.currentTextChanged.connect(self._on_recipe_current_text_changed)
        self.nodes.itemChanged.connect(lambda _item: self._show_groups())
        self.nodes.model().rowsMoved.connect(lambda *_: self._show_groups())
        self.browse.clicked.connect(self._on_browse_clicked)
        self.install.clicked.connect(self.install_clicked)
        self.replicas.valueChanged.connect(lambda _v: self._show_groups())
        self.check.clicked.connect(self.check_clicked)
        self.start.clicked.connect(self.start_clicked)
        self.cancel.clicked.connect(self.cancel_clicked)

    def _layout(self) -> None:
        form = QFormLayout()
        form.addRow("Recipe", self.recipe)
        form.addRow("", self.description)
        form.addRow("Nodes (drag to order)", self.nodes)
        form.addRow("Replicas", self.replicas)
        form.addRow("Groups", self.groups)
        model = QHBoxLayout()
        model.addWidget(self.model, 1)
        model.addWidget(self.browse)
        form.addRow("Model path", model)
        engine = QHBoxLayout()
        engine.addWidget(self.engine, 1)
        engine.addWidget(self.install)
        form.addRow("Engine", engine)
        form.addRow("", self.install_progress)
        size = QHBoxLayout()
        size.addWidget(self.params)
        size.addWidget(self.quant)
        form.addRow("Model size", size)
        buttons = QHBoxLayout()
        for button in (self.check, self.start, self.cancel):
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.fit)
        layout.addWidget(self.progress, 1)

    # --- what there is to choose from ------------------------------------------------------------

    def set_recipes(self, recipes: dict[str, Recipe]) -> None:
        current = self.recipe.currentText()
        self.recipes = dict(recipes)
        self.recipe.blockSignals(True)
        self.recipe.clear()
        self.recipe.addItems(sorted(self.recipes))
        self.recipe.blockSignals(False)
        if current in self.recipes:
            self.recipe.setCurrentText(current)
        self._on_recipe_current_text_changed(self.recipe.currentText())

    def set_nodes(self, names: list[str]) -> None:
        """The paired nodes; a node keeps its check and place when the list is read again."""
        checked = set(self.checked_nodes())
        kept = [self.nodes.item(i).text() for i in range(self.nodes.count())]
        order = [n for n in kept if n in names] + [n for n in names if n not in kept]
        self.nodes.blockSignals(True)
        self.nodes.clear()
        for name in order:
            item = QListWidgetItem(name, self.nodes)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsDragEnabled)
            item.setCheckState(Qt.CheckState.Checked if name in checked else Qt.CheckState.Unchecked)
        self.nodes.blockSignals(False)
        self._show_groups()

    def _on_recipe_current_text_changed(self, name: str) -> None:
        recipe = self.recipes.get(name)
        if recipe is None:
            self.description.setText("")
            return
        self.description.setText(
            f"{recipe.description} ({recipe.engine.value}, {recipe.parallelism.describe()})"
        )
        self.replicas.setValue(recipe.parallelism.replicas)
        self.model.setPlaceholderText(recipe.model)
        self._show_groups()

    # --- the choice ------------------------------------------------------------------------------

    def checked_nodes(self) -> list[str]:
        items = [self.nodes.item(i) for i in range(self.nodes.count())]
        return [item.text() for item in items if item.checkState() == Qt.CheckState.Checked]

    def check_nodes(self, names: list[str]) -> None:
        for i in range(self.nodes.count()):
            item = self.nodes.item(i)
            item.setCheckState(Qt.CheckState.Checked if item.text() in names else Qt.CheckState.Unchecked)

    def choice(self) -> LaunchChoice:
        """What to launch; raises a SparkSyncError in plain words when something is missing."""
        if not self.recipe.currentText():
            raise SparkSyncError("choose a recipe first.")
        nodes = self.checked_nodes()
        groups_of(nodes, self.replicas.value())  # refuses an uneven split, in words
        params = self.params.value() or None
        return LaunchChoice(
            recipe=self.recipe.currentText(), nodes=nodes, replicas=self.replicas.value(),
            model=self.model.text().strip(), params_b=params, quant=self.quant.currentText() if params else None,
        )  # fmt: skip

    def set_choice(self, choice: LaunchChoice) -> None:
        if choice.recipe in self.recipes:
            self.recipe.setCurrentText(choice.recipe)
        self.check_nodes(choice.nodes)
        self.replicas.setValue(choice.replicas)
        self.model.setText(choice.model)
        self.params.setValue(choice.params_b or 0.0)
        if choice.quant:
            self.quant.setCurrentText(choice.quant)

    def pick_model(self, path: str) -> None:
        """Use ``path`` as the model (what the file dialog gives)."""
        if path:
            self.model.setText(path)

    def _on_browse_clicked(self) -> None:
        start = self.model.text().strip() or ""
        path, _ = QFileDialog.getOpenFileName(self, "Pick a GGUF model file", start, GGUF_FILTER)
        self.pick_model(path)

    def _show_groups(self) -> None:
        nodes = self.checked_nodes()
        head = nodes[0] if nodes else None
        if head != self._head:
            self._head = head
            self.head_changed.emit(head)
        try:
            groups = groups_of(nodes, self.replicas.value())
        except SparkSyncError as exc:
            self.groups.setText(str(exc))
            self.groups.setStyleSheet(BAD_STYLE)
            return
        self.groups.setStyleSheet(OK_STYLE)
        self.groups.setText("; ".join(f"group {i + 1}: {', '.join(g)}" for i, g in enumerate(groups)))

    # --- results ---------------------------------------------------------------------------------

    def show_engine(self, present: bool | None, text: str) -> None:
        """The head node's llama.cpp: present (True), missing (False, offers the install) or unknown."""
        self.engine.setText(text)
        self.engine.setStyleSheet(BAD_STYLE if present is False else OK_STYLE)
        self.install.setVisible(present is False)

    def set_installing(self, installing: bool) -> None:
        self.install.setEnabled(not installing)
        self.install_progress.setVisible(installing)
        if installing:
            self.install_progress.setValue(0)
            self.install_progress.setFormat("checking…")

    def show_install(self, progress: InstallProgress) -> None:
        """One step of an engine install: the bar shows the step and, while compiling, how far."""
        if progress.percent is not None:
            self.install_progress.setValue(int(progress.percent))
        elif progress.step == "done":
            self.install_progress.setValue(100)
        self.install_progress.setFormat(f"{progress.step} %p%")

    def show_fit(self, lines: list[str], ok: bool) -> None:
        self.fit.setText("\n".join(lines))
        self.fit.setStyleSheet(OK_STYLE if ok else BAD_STYLE)

    def set_busy(self, busy: bool) -> None:
        for widget in (self.check, self.start):
            widget.setEnabled(not busy)
        self.cancel.setEnabled(busy)

    def clear_progress(self) -> None:
        self.progress.setRowCount(0)

    def show_progress(self, event: Progress) -> None:
        """One row per process with its latest step; events about the whole workload go to the fit line."""
        if event.name is None:
            return
        row = self._progress_row(event.name)
        for column, text in enumerate((event.name, event.node or "", event.event)):
            self.progress.setItem(row, column, QTableWidgetItem(text))

    def progress_steps(self) -> dict[str, str]:
        return {
            self.progress.item(r, 0).text(): self.progress.item(r, 2).text()
            for r in range(self.progress.rowCount())
        }

    def _progress_row(self, name: str) -> int:
        for row in range(self.progress.rowCount()):
            if self.progress.item(row, 0).text() == name:
                return row
        self.progress.insertRow(self.progress.rowCount())
        return self.progress.rowCount() - 1
