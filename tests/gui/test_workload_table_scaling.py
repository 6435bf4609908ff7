"""The workloads table shows a training run's scaling efficiency against its one-node baseline."""

from __future__ import annotations

import pytest

from sparksync.core.workloads.baseline import BaselineStore, key_of
from sparksync.core.workloads.workload_control import WorkloadControl
from sparksync.core.workloads.workload_store import WorkloadStore
from sparksync.gui.workloads.workload_table import COLUMNS, WorkloadTable
from tests.core.workloads.baseline_fakes import TrainingAgents, training_record

pytestmark = pytest.mark.gui

SCALING = COLUMNS.index("Scaling")


def test_the_table_shows_efficiency_or_why_there_is_none(qtbot):
    record, argv = training_record("train-w", 4)
    WorkloadStore().add(record)
    agents = TrainingAgents(record, argv)
    agents.history = {node: [2000.0] for node in record.nodes()}  # 8,000 tok/s on 4 nodes
    control = WorkloadControl(lambda: agents)
    table = WorkloadTable()
    qtbot.addWidget(table)

    table.show_rows(control.watch_once())
    top = table.topLevelItem(0)
    assert top.text(3) == "8,000.0"
    assert top.text(SCALING).startswith("no one-node baseline yet: run it on one node first")

    # 8,000 / (4 x 2,500) = 80.0 %, speed-up 8,000 / 2,500 = 3.20x
    BaselineStore().set(key_of("train", argv["spark-1"]), 2500)
    table.show_rows(control.watch_once())
    top = table.topLevelItem(0)
    assert top.text(SCALING) == "80.0% (3.20x of 2,500 tok/s)"
    assert "train.py --batch 32" in top.toolTip(SCALING)


def test_a_stale_baseline_is_flagged_in_the_table_with_the_reason_and_what_to_do(qtbot):
    from sparksync.core.workloads.baseline import Baseline

    record, argv = training_record("train-s", 2)
    WorkloadStore().add(record)
    agents = TrainingAgents(record, argv)
    agents.history = {node: [950.0] for node in record.nodes()}
    agents.torch = {node: "2.6.0" for node in record.nodes()}
    BaselineStore().put(Baseline(key=key_of("train", argv["spark-1"]), tokens_per_s=1000.0, source="measured",
                                 torch_version="2.5.1"))  # fmt: skip
    table = WorkloadTable()
    qtbot.addWidget(table)
    table.show_rows(WorkloadControl(lambda: agents).watch_once())
    top = table.topLevelItem(0)
    assert top.text(SCALING).startswith("95.0% (1.90x of 1,000 tok/s) FLAGGED: stale baseline "
                                        "(torch 2.5.1 then, 2.6.0 now)")
    tip = top.toolTip(SCALING)
    assert "flagged: the baseline" in tip and "torch 2.5.1 then, 2.6.0 now" in tip
    assert "re-measure the one-node baseline with the software and nodes of this run" in tip
