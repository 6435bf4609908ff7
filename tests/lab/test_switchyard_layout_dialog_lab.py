"""The published layout from the app's dialog, for real: two lab nodes, real agents, real llama.cpp, the gateway.

The dialog reads the user's recipes and the paired nodes, shows the 2-node
form, runs the memory check through the agents, then starts one large and
one small replica as a workload and the gateway on the second node as
another; requests through that gateway reach both replicas.
"""

from __future__ import annotations

import shlex
from collections import Counter

import httpx
import pytest

from sparksync.core.nodes.registry import Registry
from sparksync.core.workloads import running
from sparksync.core.workloads.recipe_files import find_recipe, save_recipe
from sparksync.switchyard.layout import LayoutStarted
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.engines.tinymodel import SMALL, train_tokenizer, write_tiny_model
from tests.lab.test_fleet_lab import agent_python, client_key, lab_agents, open_fleet  # noqa: F401
from tests.lab.test_workloads_lab import HTTP_PORT, SPLIT_MODEL, binaries, no_processes_left  # noqa: F401
from tests.lab.workload_lab import SharedDir, engine_tunnel

pytestmark = [pytest.mark.lab, pytest.mark.gui, pytest.mark.engine]

WAIT_MS = 240_000


def user_recipe(name: str, llama, folder: SharedDir, spec) -> None:
    base = find_recipe("llamacpp-single")
    save_recipe(base.updated(
        name=name, model=str(folder.path / f"{spec.name}.gguf"), served_name=spec.name,
        ports={**base.ports.model_dump(), "http": HTTP_PORT},
        llamacpp={**base.llamacpp.model_dump(), "server_binary": str(llama.llama_server), "threads": 1,
                  "context": 1024, "parallel": 2},
    ))  # fmt: skip


def test_the_dialog_checks_and_starts_the_two_node_form_with_its_gateway(
    qtbot, lab_agents, client_key, binaries, agent_python, tmp_path  # noqa: F811
):
    from sparksync.gui.switchyard.layout_dialog import LayoutDialog

    ssh_lab, agents = lab_agents(2)
    folder = SharedDir(prefix="sparksync-layout-gui-")
    tokenizer = train_tokenizer()
    for spec in (SMALL, SPLIT_MODEL):
        write_tiny_model(folder.path, spec, tokenizer)
    folder.publish()
    user_recipe("lab-large", binaries, folder, SPLIT_MODEL)
    user_recipe("lab-small", binaries, folder, SMALL)
    try:
        with open_fleet(ssh_lab, client_key) as fleet:
            nodes_agents = fleet
            dialog = LayoutDialog(lambda: nodes_agents, lambda: [(n.name, n.host) for n in Registry().list()],
                                  config_path=tmp_path / "layout.toml")  # fmt: skip
            qtbot.addWidget(dialog)
            with qtbot.waitSignal(dialog.loaded, timeout=WAIT_MS):
                dialog.load()
            dialog.show()
            names = [node.name for node in ssh_lab.nodes]
            dialog.large.setCurrentText("lab-large")
            dialog.small.setCurrentText("lab-small")
            dialog.tick(names[:1])
            assert dialog.shape.text() == "1 node(s) ticked: tick 2, 4 or 8"
            dialog.tick(names)
            # The nodes are listed in the order they were paired (the lab pairs them at once).
            large_node, small_node = dialog.ticked()
            assert sorted((large_node, small_node)) == sorted(names)
            assert dialog.shape.text().startswith("1 x large on 1 node(s) + 1 x small on 1 node(s)")
            assert dialog.gateway_node.currentText() == small_node  # beside the small replica
            dialog.program.setText(shlex.join([str(agent_python), "-m", "sparksync"]))
            with qtbot.waitSignal(dialog.checked, timeout=WAIT_MS) as checked:
                dialog.check_button.click()
            assert checked.args == [True], dialog.log.toPlainText()
            assert f"switchyard-large-1 on {large_node}: not checked" in dialog.log.toPlainText()
            with qtbot.waitSignal(dialog.finished_start, timeout=WAIT_MS) as done:
                dialog.start_button.click()
            started = done.args[0]
            assert isinstance(started, LayoutStarted), started
            assert started.replicas.state == "ready" and started.gateway is not None
            assert started.gateway.state == "ready"
            assert (tmp_path / "layout.toml").exists()
            with engine_tunnel(fleet, small_node, started.config.listen.port) as tunnel:
                url = f"http://127.0.0.1:{tunnel.local_port}/v1/chat/completions"
                body = {"model": "switchyard", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
                served = Counter(httpx.post(url, json=body, timeout=120, trust_env=False).headers["x-switchyard-pool"]
                                 for _ in range(4))  # fmt: skip
            assert served == {"small": 3, "large": 1}
            for view in (started.gateway, started.replicas):
                running.stop(nodes_agents, view.record, grace_s=5)
            assert dialog.wait(60)
    finally:
        folder.remove()
    no_processes_left(ssh_lab, agents)
