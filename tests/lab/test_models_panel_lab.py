"""The Models panel for real: three lab nodes, the matrix, a copy with a bar per node, a delete, an error.

The panel reaches the nodes' agents through the fleet's SSH tunnels, as the
app does; the nodes copy to each other over node-to-node SSH
(``model_lab.mesh_keys``) with real rsync. Set SPARKSYNC_SCREENSHOTS_DIR to
save the panel there (models.png), as docs/screenshots/models.png is made.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.core.models.model_files import write_safetensors, write_tiny_gguf
from tests.lab.model_lab import give, mesh_keys, same_files, store_of
from tests.lab.test_fleet_lab import agent_python, client_key, lab_agents, open_fleet  # noqa: F401

pytestmark = [pytest.mark.lab, pytest.mark.gui]

WAIT_MS = 120_000


def test_the_panel_shows_the_matrix_copies_with_a_bar_per_node_deletes_and_shows_errors(
    qtbot, lab_agents, client_key, tmp_path  # noqa: F811
):
    from PySide6.QtCore import Qt

    from sparksync.gui.models.models_panel import ModelsPanel

    ssh_lab, agents = lab_agents(3)
    first, second, third = ssh_lab.nodes
    mesh_keys(ssh_lab, ssh_lab.nodes)
    source = store_of(ssh_lab, first)
    write_safetensors(source / "org" / "st-model", shards=3, shard_bytes=2 << 20)
    write_tiny_gguf(source, "tiny")
    give(ssh_lab, first, source)
    with open_fleet(ssh_lab, client_key) as fleet:
        panel = ModelsPanel(fleet=lambda: fleet)
        qtbot.addWidget(panel)
        panel.resize(1200, 760)
        with qtbot.waitSignal(panel.matrix_shown, timeout=WAIT_MS) as shown:
            panel.show()
        matrix = shown.args[0]
        assert matrix.models == ["org/st-model", "tiny"]
        names = [c.name for c in matrix.nodes]
        assert names[0] == "this computer" and sorted(names[1:]) == sorted(n.name for n in ssh_lab.nodes)
        col = {name: 1 + i for i, name in enumerate(names)}  # column 0 is the size
        table = panel.table
        assert table.item(0, col[first.name]).text().startswith("present")
        assert table.item(0, col[second.name]).text() == "—"
        assert table.verticalHeaderItem(2).text() == "free" and "GB" in table.item(2, col[first.name]).text()

        table.setCurrentCell(0, col[first.name])
        assert panel.copy_button.isEnabled() and panel.delete_button.isEnabled()
        panel.source.setCurrentText(first.name)
        panel.check_targets([second.name, third.name])
        with qtbot.waitSignal(panel.copy_finished, timeout=WAIT_MS) as finished:
            panel.copy_button.click()
            qtbot.waitUntil(lambda: panel.stop_button.isEnabled(), timeout=5_000)
        report = finished.args[0]
        assert not isinstance(report, str), report
        assert report.ok and {r.node for r in report.results} == {second.name, third.name}
        for node in (second, third):
            bar = panel.bars.rows[node.name][1]
            assert bar.value() == 1000
            assert "done (ssh)" in panel.bars.rows[node.name][2].text()
        assert same_files(source / "org" / "st-model", store_of(ssh_lab, third) / "org" / "st-model")
        qtbot.waitUntil(lambda: panel.table.item(0, col[third.name]) is not None
                        and panel.table.item(0, col[third.name]).text().startswith("present"),
                        timeout=WAIT_MS)  # fmt: skip
        shot(qtbot, panel, tmp_path / "models.png")

        # Delete it on one node: its cell turns missing.
        table.setCurrentCell(0, col[third.name])
        with qtbot.waitSignal(panel.deleted, timeout=WAIT_MS) as deleted:
            panel.delete_button.click()
        assert deleted.args[0] == ("org/st-model", third.name)
        qtbot.waitUntil(lambda: panel.matrix is not None
                        and panel.matrix.cell("org/st-model", third.name).state == "missing", timeout=WAIT_MS)  # fmt: skip
        assert not (store_of(ssh_lab, third) / "org" / "st-model").exists()

        # An error reaches the user where they look: a fetch from a hub that does not answer.
        panel.repo.setText("acme/nothing")
        panel.fetch_node.setCurrentText(second.name)
        panel.endpoint.setText("http://127.0.0.1:9")
        with qtbot.waitSignal(panel.fetch_finished, timeout=WAIT_MS) as fetched:
            panel.fetch_button.click()
        assert isinstance(fetched.args[0], str) and "acme/nothing" in fetched.args[0]
        assert "acme/nothing" in panel.error.text()
        assert "failed" in panel.bars.rows[second.name][2].text()
        assert Qt  # (imported for the waits above)
        panel.jobs.wait()


def shot(qtbot, panel, path: Path) -> None:
    from PySide6.QtGui import QImage

    qtbot.waitExposed(panel)
    assert panel.grab().toImage().save(str(path), "PNG")
    grey = QImage(str(path)).convertToFormat(QImage.Format.Format_Grayscale8)
    pixels = np.frombuffer(grey.constBits(), dtype=np.uint8, count=grey.sizeInBytes())
    assert pixels.std() > 10
    target = os.environ.get("SPARKSYNC_SCREENSHOTS_DIR")
    if target:
        shutil.copyfile(path, Path(target) / "models.png")


@pytest.mark.engine
def test_the_workloads_panel_offers_one_button_that_copies_the_model_then_starts(
    qtbot, lab_agents, client_key  # noqa: F811
):
    from sparksync.core.engines.llamacpp_build import find_binaries
    from sparksync.core.workloads import LaunchChoice, WorkloadControl
    from sparksync.gui.workloads.workloads_panel import WorkloadsPanel

    binaries = find_binaries("cpu")
    if binaries is None:
        pytest.skip("llama.cpp is not built; run `make engines`")
    ssh_lab, agents = lab_agents(2)
    first, second = ssh_lab.nodes
    mesh_keys(ssh_lab, ssh_lab.nodes)  # the copy goes node to node; this process dials through the lab
    source = store_of(ssh_lab, first)
    write_tiny_gguf(source / "tiny")
    give(ssh_lab, first, source)
    choice = LaunchChoice(recipe="llamacpp-single", nodes=[second.name], model="tiny", http_port=18081,
                          settings={"llamacpp": {"server_binary": str(binaries.llama_server), "threads": 1,
                                                 "context": 512, "parallel": 1}})  # fmt: skip
    with open_fleet(ssh_lab, client_key) as fleet:
        panel = WorkloadsPanel(WorkloadControl(lambda: fleet), refresh_ms=500)
        qtbot.addWidget(panel)
        try:
            panel.show()
            with qtbot.waitSignal(panel.launch_finished, timeout=WAIT_MS) as refused:
                assert panel.start(choice)
            message = refused.args[0]
            assert isinstance(message, str) and f"is not on {second.name}" in message, message
            assert "copying it from" in message
            assert panel.copy_model_button.isVisible()
            with qtbot.waitSignal(panel.launch_finished, timeout=WAIT_MS) as started:
                panel.copy_model_button.click()
            view = started.args[0]
            assert not isinstance(view, str), view
            assert view.state == "ready"
            [rank] = view.ranks
            argv = rank.status.argv
            assert argv[argv.index("-m") + 1] == str(store_of(ssh_lab, second) / "tiny" / "tiny.gguf")
            assert not panel.copy_model_button.isVisible()
            qtbot.waitUntil(lambda: panel.table.state_of(view.workload_id) == "ready", timeout=WAIT_MS)
            panel.table.select(view.workload_id)
            panel.stop_button.click()
            qtbot.waitUntil(lambda: panel.table.state_of(view.workload_id) == "stopped", timeout=WAIT_MS)
        finally:
            assert panel.shutdown(60)
