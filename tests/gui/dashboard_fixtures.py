"""Helpers for dashboard tests: Spark-shaped samples fed straight into the model (no agents)."""

from __future__ import annotations

import time

from sparksync.core.telemetry.dashboard_model import DashboardModel
from tests.core.dashboard_samples import spark_sample

NOW = float(int(time.time()))


def feed(
    model: DashboardModel, nodes: list[str], seconds: float, hz: float = 1.0, end: float = NOW, **kwargs
) -> None:
    """``seconds`` of samples per node ending at ``end``, nodes interleaved as they would arrive."""
    n = int(seconds * hz)
    for i in range(n):
        ts = end - (n - 1 - i) / hz
        for j, node in enumerate(nodes):
            model.add_sample(node, spark_sample(i + 1, ts + j * 0.01, **kwargs))


def drawn(qtbot, view, action=None, timeout: int = 5_000):
    """Run ``action`` (if any) and wait for the next complete frame."""
    with qtbot.waitSignal(view.frame_drawn, timeout=timeout):
        if action is not None:
            action()


def original(curve):
    """The data the dashboard handed to a curve (before pyqtgraph clips and downsamples it)."""
    dataset = curve.getOriginalDataset()
    return dataset[0], dataset[1]
