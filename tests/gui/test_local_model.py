"""A model on this computer from the GUI, for real: the dashboard's first run and the Workloads panel.

The window is the app's (``MainWindow`` over the real ``ClusterActions``
and fleet); the model is SparkSync's demo model, the engine the cached
llama-server, found on this computer's agent's PATH (no ``server_binary``).
Tokens/s is read by the agent from the engine's counters, reaches the
window in the telemetry and is plotted.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
import pytestqt.exceptions

from sparksync.core.engines import write_demo_model
from sparksync.core.telemetry import CLUSTER, TOKENS_TOTAL
from sparksync.core.telemetry.dashboard_series import tokens_series
from sparksync.core.workloads.local_model import free_port, generate_for, url_of
from sparksync.core.workloads.recipe_files import find_recipe, save_recipe
from tests.engines.conftest import llama_binaries  # noqa: F401  (the cached build, or a skip)

pytestmark = [pytest.mark.gui, pytest.mark.engine, pytest.mark.slow]

START_MS = 90_000  # the engine is up in a second; a loaded machine takes longer
TOKENS_MS = 60_000


def plotted_tokens(win, workload_id: str) -> float:
    """The largest tokens/s the dashboard's curve of the workload holds (0 before it has one)."""
    curve = win.dashboard.curve(CLUSTER, tokens_series(workload_id))
    _x, y = curve.getOriginalDataset() if curve is not None else (None, None)
    return float(np.nanmax(y)) if y is not None and len(y) and not np.isnan(y).all() else 0.0


def test_run_a_model_on_this_computer_from_the_dashboard(qtbot, live_window, llama_binaries):  # noqa: F811
    win = live_window
    card = win.local_model
    assert card is not None and card.isVisible()  # offered on the dashboard, first thing
    card.generate_s = 30.0
    qtbot.waitUntil(lambda: card.engine.text() == "llama.cpp: ready", timeout=TOKENS_MS)
    card.demo.click()
    qtbot.waitUntil(lambda: card.model.text().endswith("sparksync-demo.gguf"), timeout=30_000)
    with qtbot.waitSignal(card.started, timeout=START_MS) as started:
        card.start_button.click()
    view = started.args[0]
    assert view.state == "ready" and view.record.nodes() == ["this computer"]
    assert view.ranks[0].status.argv[0] == "llama-server"
    # It answers at once (the card asks it for 30 s): tokens/s flows into the telemetry and onto the plot.
    qtbot.waitUntil(lambda: (win.model.latest(CLUSTER, tokens_series(view.workload_id)) or 0) > 0, timeout=TOKENS_MS)
    assert win.model.latest(CLUSTER, TOKENS_TOTAL) > 0  # nothing paired: this computer is the cluster
    qtbot.waitUntil(lambda: plotted_tokens(win, view.workload_id) > 0, timeout=TOKENS_MS)
    with qtbot.waitSignal(card.stopped, timeout=START_MS):
        card.stop_button.click()
    assert not card.generate.isEnabled() and card.start_button.isEnabled()


def test_a_workload_on_this_computer_from_the_workloads_panel(qtbot, live_window, monkeypatch, llama_binaries):  # noqa: F811
    from PySide6.QtWidgets import QFileDialog

    win = live_window
    port = free_port()
    here = find_recipe("llamacpp-single")
    save_recipe(here.updated(name="llamacpp-here", ports={**here.ports.model_dump(), "http": port},
                             llamacpp={**here.llamacpp.model_dump(), "threads": 1, "context": 2048}))  # fmt: skip
    panel = win.workloads
    with qtbot.waitSignal(panel.recipes_loaded, timeout=30_000):
        win.tabs.setCurrentWidget(panel)
    form = panel.form
    qtbot.waitUntil(lambda: "this computer" in [form.nodes.item(i).text() for i in range(form.nodes.count())])
    model = write_demo_model()
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *args, **kwargs: (str(model), "GGUF models (*.gguf)"))
    form.browse.click()  # the file dialog picks the GGUF
    assert form.model.text() == str(model)
    form.recipe.setCurrentText("llamacpp-here")
    with qtbot.waitSignal(panel.engine_shown, timeout=TOKENS_MS) as engine:
        form.check_nodes(["this computer"])
    assert engine.args == ["this computer", True] and str(llama_binaries.root) in form.engine.text()
    assert not form.install.isVisible()
    with qtbot.waitSignal(panel.launch_finished, timeout=START_MS) as done:
        form.start.click()
    view = done.args[0]
    assert not isinstance(view, str), view
    assert view.state == "ready" and view.record.endpoints[0].port == port
    stop = threading.Event()
    load = threading.Thread(target=generate_for, args=(url_of(view), 60.0, stop), name="test-load")
    load.start()
    try:
        qtbot.waitUntil(lambda: any((r.decode_tps or 0) > 0 for r in panel.rows), timeout=TOKENS_MS)
        qtbot.waitUntil(lambda: (win.model.latest(CLUSTER, tokens_series(view.workload_id)) or 0) > 0,
                        timeout=TOKENS_MS)  # fmt: skip
    finally:
        stop.set()
        load.join()
    # "Open API": the engine's local URL shows below the list, and answers.
    panel.table.select(view.workload_id)
    qtbot.waitUntil(panel.open_button.isEnabled, timeout=10_000)
    told: list[str] = []  # what the panel said meanwhile: why, if the URL never shows
    panel.status_message.connect(told.append)
    panel.error_raised.connect(told.append)
    assert panel._selected_id() == view.workload_id
    panel.open_button.click()
    try:
        qtbot.waitUntil(lambda: "/v1" in panel.api_label.text(), timeout=60_000)
    except pytestqt.exceptions.TimeoutError as exc:
        raise AssertionError(f"no URL shown; the panel said: {told}") from exc
    assert panel.open_button.text() == "Close API"
    [url] = panel._api_open[view.workload_id]
    import httpx

    assert httpx.get(f"{url}/models", timeout=10).raise_for_status().json()["data"]
    if os.environ.get("SPARKSYNC_SCREENSHOTS"):
        win.grab().save(str(Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "workload_open_api.png"))
    panel.open_button.click()
    qtbot.waitUntil(lambda: panel.api_label.text() == "", timeout=10_000)
    removed = []
    panel.jobs.run("Removing", lambda: panel.control.remove(view.workload_id), removed.append)
    qtbot.waitUntil(lambda: bool(removed), timeout=START_MS)
    assert panel.control.store.list() == []
