"""The dashboard fed by the real local agent: live memory for "this computer" (offscreen Qt)."""

from __future__ import annotations

import numpy as np
import pytest

from sparksync.core.agents import LOCAL_NODE_NAME
from sparksync.core.base.units import format_bytes, format_memory
from tests.machine import mem_total_bytes

pytestmark = pytest.mark.gui


def test_live_memory_of_this_computer(qtbot, live_window):
    dashboard = live_window.dashboard
    curve = dashboard.curve(LOCAL_NODE_NAME, "mem.used")
    qtbot.waitUntil(lambda: curve.getOriginalDataset()[0] is not None and len(curve.getOriginalDataset()[0]) >= 5,
                    timeout=15_000)  # fmt: skip
    _, used_gb = curve.getOriginalDataset()
    total_gb = mem_total_bytes() / 1e9
    assert np.all((used_gb > 0) & (used_gb < total_gb))
    assert dashboard.plots["memory"].axis_label() == "memory (GB)"
    # The cluster of one: its capacity is this machine's MemTotal, computed, not assumed.
    qtbot.waitUntil(
        lambda: format_bytes(mem_total_bytes()) in dashboard.plots["cluster_memory"].title(), timeout=10_000
    )
    t = curve.getOriginalDataset()[0][-1]
    dashboard.readout.show_at(dashboard.plots["memory"], t)
    latest = live_window.model.window(LOCAL_NODE_NAME, "mem.used", t - 0.01)[1][0]
    assert f"{LOCAL_NODE_NAME} memory used: {format_memory(latest)}" in dashboard.readout.text()
