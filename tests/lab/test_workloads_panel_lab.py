"""The Workloads panel for real: a user recipe picked, a lab node ticked, llama.cpp started, its log read, stopped.

One paired lab node runs a real agent (``lab_agents``); the panel reaches
it through the fleet's SSH tunnel (``Fleet.call``), exactly as the app
does, and starts the cached llama.cpp build on a tiny model through the
orchestrator. The recipe is a user recipe file, as a user would save one.
"""

from __future__ import annotations

import pytest

from sparksync.core.workloads.recipe_files import find_recipe, save_recipe
from sparksync.core.workloads.workload_control import WorkloadControl
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.test_fleet_lab import agent_python, client_key, lab_agents, open_fleet  # noqa: F401
from tests.lab.test_workloads_lab import (  # noqa: F401  (fixtures)
    HTTP_PORT,
    SPLIT_MODEL,
    binaries,
    no_processes_left,
    shared,
)

pytestmark = [pytest.mark.lab, pytest.mark.gui, pytest.mark.engine]

WAIT_MS = 180_000  # a loaded two-core machine: SSH, the agent, then llama-server loading


def lab_recipe(llama, folder):
    base = find_recipe("llamacpp-single")
    return base.updated(
        name="lab-llama",
        description="llama.cpp on one lab node",
        model=str(folder.path / f"{SPLIT_MODEL.name}.gguf"),
        served_name="tiny",
        ports={**base.ports.model_dump(), "http": HTTP_PORT},
        llamacpp={**base.llamacpp.model_dump(), "server_binary": str(llama.llama_server), "threads": 1,
                  "context": 1024, "parallel": 1},
    )  # fmt: skip


def test_the_panel_starts_a_real_llamacpp_workload_shows_its_log_and_stops_it(
    qtbot,
    lab_agents,  # noqa: F811
    client_key,  # noqa: F811
    binaries,  # noqa: F811
    shared,  # noqa: F811
):
    from sparksync.gui.workloads.workloads_panel import WorkloadsPanel

    ssh_lab, agents = lab_agents(1)
    node = ssh_lab.nodes[0]
    save_recipe(lab_recipe(binaries, shared))
    with open_fleet(ssh_lab, client_key) as fleet:
        panel = WorkloadsPanel(WorkloadControl(lambda: fleet), refresh_ms=500)
        qtbot.addWidget(panel)
        try:
            with qtbot.waitSignal(panel.recipes_loaded, timeout=WAIT_MS):
                panel.show()
            panel.set_nodes([node.name])
            panel.form.recipe.setCurrentText("lab-llama")
            panel.form.check_nodes([node.name])
            with qtbot.waitSignal(panel.launch_finished, timeout=WAIT_MS) as done:
                panel.form.start.click()
            view = done.args[0]
            assert not isinstance(view, str), view
            assert view.state == "ready"
            [rank] = view.ranks
            assert panel.form.progress_steps() == {rank.ref.name: "ready"}

            qtbot.waitUntil(lambda: panel.table.state_of(view.workload_id, rank.ref.name) == "ready",
                            timeout=WAIT_MS)  # fmt: skip
            panel.table.select(view.workload_id, rank.ref.name)
            qtbot.waitUntil(lambda: panel._log_seq > 0, timeout=WAIT_MS)
            first = panel.log_view.toPlainText().splitlines()[0]
            assert first.split()[0] == "1"  # lines carry the agent's sequence numbers

            panel.table.select(view.workload_id)
            panel.stop_button.click()
            qtbot.waitUntil(lambda: panel.table.state_of(view.workload_id) == "stopped", timeout=WAIT_MS)
            no_processes_left(ssh_lab, agents)
        finally:
            assert panel.shutdown(60)
