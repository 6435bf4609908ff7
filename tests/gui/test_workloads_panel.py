"""The Workloads panel driven like a user would, against agent-shaped fakes (tests/core/workloads/fake_agents.py).

Pick a recipe, tick nodes, check memory (refused with the numbers), start
(ranks go ready), follow a log, stop, restart; a rank that fails reaches the
notifier; the tray starts and stops the last workload. The real path (a real
agent running llama.cpp on a lab node) is at the end, marked lab.
"""

from __future__ import annotations

import pytest
from sparksync_agent.atomic import write_atomic
from sparksync_agent.protocol import LogLine, LogPage, RankState

from sparksync.core.workloads.last_workload import Launches
from sparksync.core.workloads.launch_choice import LaunchChoice, groups_of, resolve_choice
from sparksync.core.workloads.recipe_files import all_recipes, save_recipe
from sparksync.core.workloads.workload_control import WorkloadControl
from sparksync.core.workloads.workload_store import WorkloadStore
from tests.core.workloads.fake_agents import FakeCluster, FakeNodeClient

pytestmark = pytest.mark.gui

NODES = ["spark-1", "spark-2", "spark-3"]
WAIT_MS = 30_000


class TalkingCluster(FakeCluster):
    """Fake agents whose processes write numbered log lines, a few more at each read."""

    def __init__(self, names, **kwargs):
        super().__init__(names, **kwargs)
        self.clients = {name: TalkingNode(self, c.name, c.index, c.free_gb, c.ready_after)
                        for name, c in self.clients.items()}  # fmt: skip


class TalkingNode(FakeNodeClient):
    def logs(self, workload_id, name=None, since=0, limit=None):
        self.cluster.log(self.name, "logs", name or "")
        self.written = getattr(self, "written", 0) + 2
        lines = [LogLine(seq=i, text=f"{name} line {i}") for i in range(since + 1, self.written + 1)]
        return LogPage(
            workload_id=workload_id, name=name or "", since=since, lines=lines, last_seq=self.written
        )

    def fail(self, workload_id: str, role: str) -> None:
        for status in self.ranks[workload_id].values():
            if status.role == role:
                status.state, status.exit_code = RankState.failed, 1
                status.message = "exited with status 1"

    def finish(self, workload_id: str) -> None:
        """Every rank here ends by itself with status 0 (a training job that is done)."""
        for status in self.ranks[workload_id].values():
            status.state, status.exit_code = RankState.exited, 0


@pytest.fixture
def panel_for(qtbot, home):
    made = []

    def make(cluster: FakeCluster, nodes=NODES):
        from sparksync.gui.workloads.workloads_panel import WorkloadsPanel

        control = WorkloadControl(lambda: cluster, poll_s=0.001, stop_grace_s=0.1)
        panel = WorkloadsPanel(control, refresh_ms=200)
        qtbot.addWidget(panel)
        with qtbot.waitSignal(panel.recipes_loaded, timeout=WAIT_MS):
            panel.show()
        panel.set_nodes(nodes)
        made.append(panel)
        return panel

    yield make
    for panel in made:
        assert panel.shutdown(30)


def choose(panel, recipe: str, nodes: list[str], model: str = "/models/m.gguf", replicas: int | None = None):
    panel.form.recipe.setCurrentText(recipe)
    panel.form.check_nodes(nodes)
    if replicas is not None:
        panel.form.replicas.setValue(replicas)
    panel.form.model.setText(model)


def start(qtbot, panel):
    with qtbot.waitSignal(panel.launch_finished, timeout=WAIT_MS) as done:
        panel.form.start.click()
    return done.args[0]


def wait_state(qtbot, panel, workload_id: str, state: str, name: str | None = None):
    qtbot.waitUntil(lambda: panel.table.state_of(workload_id, name) == state, timeout=WAIT_MS)


# --- choosing -------------------------------------------------------------------------------------


def test_the_picker_lists_built_ins_and_the_users_recipe_files(panel_for, qtbot):
    built_in = all_recipes()[0]["llamacpp-single"]
    save_recipe(built_in.updated(name="my-llama", description="mine"))
    panel = panel_for(FakeCluster(NODES))
    names = [panel.form.recipe.itemText(i) for i in range(panel.form.recipe.count())]
    assert {"llamacpp-single", "llamacpp-rpc", "torchrun", "my-llama"} <= set(names)
    panel.form.recipe.setCurrentText("my-llama")
    assert "mine" in panel.form.description.text()


def test_nodes_are_cut_into_groups_per_replica():
    assert groups_of(["a", "b", "c", "d"], 2) == [["a", "b"], ["c", "d"]]
    recipes = all_recipes()[0]
    plan, chosen = resolve_choice(LaunchChoice(recipe="llamacpp-rpc", nodes=["a", "b", "c", "d"], replicas=2),
                                  recipes)  # fmt: skip
    assert [g.nodes for g in plan.groups] == [["a", "b"], ["c", "d"]]
    assert chosen["llamacpp-rpc"].parallelism.pipeline == 2
    one, _ = resolve_choice(LaunchChoice(recipe="llamacpp-rpc", nodes=["a", "b", "c"]), recipes)
    assert [g.nodes for g in one.groups] == [["a", "b", "c"]]  # one group stretched over all three
    with pytest.raises(Exception, match="cannot be split into 2 equal groups"):
        groups_of(["a", "b", "c"], 2)


def test_the_groups_line_follows_the_ticks_and_refuses_an_uneven_split(panel_for):
    panel = panel_for(FakeCluster(NODES))
    choose(panel, "llamacpp-rpc", ["spark-1", "spark-2", "spark-3"], replicas=1)
    assert panel.form.groups.text() == "group 1: spark-1, spark-2, spark-3"
    panel.form.replicas.setValue(2)
    assert "cannot be split into 2 equal groups" in panel.form.groups.text()
    panel.form.check_nodes(["spark-1", "spark-3"])
    assert panel.form.groups.text() == "group 1: spark-1; group 2: spark-3"


def test_the_memory_check_refuses_a_model_too_big_with_the_numbers(panel_for, qtbot):
    cluster = FakeCluster(NODES, free_gb=10.0)  # 10 GiB: 10.7 GB
    panel = panel_for(cluster)
    choose(panel, "llamacpp-single", ["spark-1"])
    panel.form.params.setValue(70.0)  # 70 B in bf16: 140 GB of weights
    with qtbot.waitSignal(panel.fit_shown, timeout=WAIT_MS) as shown:
        panel.form.check.click()
    assert shown.args == [False]
    text = panel.form.fit.text()
    assert "spark-1 needs 144.0 GB (weights 140.0 GB" in text and "has 10.7 GB free, 133.3 GB short" in text

    with qtbot.waitSignal(panel.launch_finished, timeout=WAIT_MS):
        panel.form.start.click()  # Start checks again and refuses the same way
    assert "has 10.7 GB free, 133.3 GB short" in panel.form.fit.text()
    assert cluster.what("start") == []  # nothing was started

    panel.form.params.setValue(1.0)  # 2 GB of weights: fits
    with qtbot.waitSignal(panel.fit_shown, timeout=WAIT_MS) as shown:
        panel.form.check.click()
    assert shown.args == [True]
    assert "needs" in panel.form.fit.text() and "free spark-1 10.7 GB: fits" in panel.form.fit.text()


# --- starting, watching, logs, stopping -----------------------------------------------------------


def test_start_shows_ranks_ready_then_logs_and_stop(panel_for, qtbot):
    cluster = TalkingCluster(NODES)
    panel = panel_for(cluster)
    choose(panel, "llamacpp-rpc", NODES)
    view = start(qtbot, panel)
    assert view.state == "ready"
    steps = panel.form.progress_steps()
    assert set(steps) == {"llamacpp-rpc-1.0.llama-server", "llamacpp-rpc-1.1.rpc-server",
                          "llamacpp-rpc-1.2.rpc-server"} and set(steps.values()) == {"ready"}  # fmt: skip
    wait_state(qtbot, panel, view.workload_id, "ready")
    for rank in view.ranks:
        assert panel.table.state_of(view.workload_id, rank.ref.name) == "ready"

    head = "llamacpp-rpc-1.0.llama-server"
    panel.table.select(view.workload_id, head)
    qtbot.waitUntil(lambda: panel._log_seq >= 4, timeout=WAIT_MS)  # followed: new lines keep coming
    text = panel.log_view.toPlainText().splitlines()
    assert text[:4] == [f"{i:>6}  {head} line {i}" for i in range(1, 5)]
    assert [int(line.split()[0]) for line in text] == list(range(1, len(text) + 1))  # no line twice

    assert panel.stop_button.isEnabled()
    panel.stop_button.click()
    wait_state(qtbot, panel, view.workload_id, "stopped")
    assert sorted(node for node, _ in cluster.what("stop")) == sorted(NODES)


def test_restart_stops_then_starts_the_same_choice(panel_for, qtbot):
    cluster = FakeCluster(NODES)
    panel = panel_for(cluster)
    choose(panel, "llamacpp-single", ["spark-2"], model="/models/small.gguf")
    first = start(qtbot, panel)
    wait_state(qtbot, panel, first.workload_id, "ready")
    panel.table.select(first.workload_id)
    with qtbot.waitSignal(panel.launch_finished, timeout=WAIT_MS) as done:
        panel.restart_button.click()
    second = done.args[0]
    assert second.workload_id != first.workload_id and second.state == "ready"
    assert ("spark-2", first.workload_id) in cluster.what("stop")
    argv = cluster.clients["spark-2"].ranks[second.workload_id]["llamacpp-single-1.0.llama-server"].argv
    assert "/models/small.gguf" in argv
    wait_state(qtbot, panel, first.workload_id, "stopped")


def test_a_rank_that_fails_while_starting_reaches_the_notifier(panel_for, qtbot):
    from PySide6.QtWidgets import QStatusBar

    from sparksync.gui.tray.notifier import Notifier

    cluster = FakeCluster(NODES)
    cluster.fail_roles.add("rpc-server")
    panel = panel_for(cluster)
    bar = QStatusBar()
    qtbot.addWidget(bar)
    notifier = Notifier(bar)
    panel.workload_failed.connect(notifier.workload_failed)
    choose(panel, "llamacpp-rpc", NODES)
    with qtbot.waitSignal(notifier.shown, timeout=WAIT_MS) as shown:
        panel.form.start.click()
    title, message, _where = shown.args
    assert title.startswith("Workload llamacpp-rpc-") and title.endswith("failed")
    assert "rank 1 (rpc-server)" in message and "spark-" in message and "exited with status 1" in message
    assert "exited with status 1" in panel.form.fit.text() and "error: out of memory" in panel.form.fit.text()


def test_a_rank_that_fails_later_reaches_the_notifier_and_the_rest_is_stopped(panel_for, qtbot):
    cluster = TalkingCluster(NODES)
    panel = panel_for(cluster)
    failures = []
    panel.workload_failed.connect(lambda wid, why: failures.append((wid, why)))
    choose(panel, "llamacpp-rpc", ["spark-1", "spark-2"])
    view = start(qtbot, panel)
    wait_state(qtbot, panel, view.workload_id, "ready")
    cluster.clients["spark-1"].fail(view.workload_id, "llama-server")
    qtbot.waitUntil(lambda: bool(failures), timeout=WAIT_MS)
    assert failures == [(view.workload_id, "rank 0 (llama-server) on spark-1: exited with status 1")]
    wait_state(qtbot, panel, view.workload_id, "stopped", "llamacpp-rpc-1.1.rpc-server")
    assert ("spark-2", view.workload_id) in cluster.what("stop")  # whole or not at all
    assert panel.table.state_of(view.workload_id) == "failed"
    assert len(failures) == 1  # told once, not at every reading
    # The details pane shows the failed process's reason in full, wrapped, whatever the column's width.
    panel.table.select(view.workload_id, "llamacpp-rpc-1.0.llama-server")
    assert "exited with status 1" in panel.detail.text() and panel.detail.wordWrap()
    assert "spark-1" in panel.detail.text()


def test_a_workload_that_ends_by_itself_is_told_and_one_stopped_here_is_not(panel_for, qtbot):
    cluster = TalkingCluster(NODES)
    panel = panel_for(cluster)
    ended = []
    panel.workload_ended.connect(lambda wid, how: ended.append((wid, how)))
    choose(panel, "llamacpp-single", ["spark-1"])
    view = start(qtbot, panel)
    wait_state(qtbot, panel, view.workload_id, "ready")
    cluster.clients["spark-1"].finish(view.workload_id)
    qtbot.waitUntil(lambda: bool(ended), timeout=WAIT_MS)
    assert ended == [(view.workload_id, "exited")]
    second = start(qtbot, panel)
    wait_state(qtbot, panel, second.workload_id, "ready")
    panel.stop(second.workload_id)
    wait_state(qtbot, panel, second.workload_id, "stopped")
    assert ended == [(view.workload_id, "exited")]  # the user's own stop is no news


def test_a_start_with_no_node_is_refused_in_words(panel_for, qtbot):
    panel = panel_for(FakeCluster(NODES))
    choose(panel, "llamacpp-single", [])
    with qtbot.waitSignal(panel.error_raised, timeout=WAIT_MS) as error:
        panel.form.start.click()
    assert error.args == ["choose at least one node."]


# --- the tray -------------------------------------------------------------------------------------


def test_the_tray_starts_and_stops_the_last_workload(panel_for, qtbot):
    from PySide6.QtWidgets import QStatusBar

    from sparksync.core.telemetry.cluster_summary import ClusterSummary
    from sparksync.gui.tray.notifier import Notifier
    from sparksync.gui.tray.tray import Tray
    from sparksync.gui.workers import Jobs
    from tests.gui.fake_core import FakeActions

    cluster = FakeCluster(NODES)
    panel = panel_for(cluster)
    bar = QStatusBar()
    qtbot.addWidget(bar)
    tray = Tray(
        FakeActions(), Jobs(), Notifier(bar), summary=lambda: ClusterSummary(0, 0, 0, None),
        summary_text=lambda s: s.text(), open_dashboard=lambda: None, pair_new_node=lambda: None,
        quit_app=lambda: None, workloads=panel,
    )  # fmt: skip
    entry = tray.menu_actions["last_workload"]
    assert not entry.isEnabled() and "Workloads tab first" in entry.toolTip()

    choose(panel, "llamacpp-single", ["spark-3"])
    view = start(qtbot, panel)
    qtbot.waitUntil(lambda: tray.menu_actions["last_workload"].text().startswith("Stop"), timeout=WAIT_MS)
    assert tray.menu_actions["last_workload"].isEnabled()
    assert tray.menu_actions["last_workload"].text() == f"Stop last workload ({view.workload_id})"
    tray.menu_actions["last_workload"].trigger()
    qtbot.waitUntil(lambda: tray.menu_actions["last_workload"].text().startswith("Start"), timeout=WAIT_MS)
    assert ("spark-3", view.workload_id) in cluster.what("stop")
    assert tray.menu_actions["last_workload"].text() == "Start last workload (llamacpp-single on spark-3)"

    with qtbot.waitSignal(panel.launch_finished, timeout=WAIT_MS) as again:
        tray.menu_actions["last_workload"].trigger()
    assert again.args[0].state == "ready" and again.args[0].workload_id != view.workload_id
    assert Launches().last().workload_id == again.args[0].workload_id  # remembered across app starts
    tray.hide()
    assert tray.jobs.wait(30)


def test_the_last_launch_is_kept_in_a_versioned_file_and_a_newer_one_is_left_alone(home):
    launches = Launches()
    choice = LaunchChoice(recipe="llamacpp-single", nodes=["a"], model="/m.gguf")
    launches.add("w-1", choice)
    assert Launches().last().choice == choice and Launches().choice("w-1") == choice
    newer = '{"version": 99, "launches": []}\n'
    launches.path.write_text(newer)
    assert Launches().last() is None
    Launches().add("w-2", choice)
    assert launches.path.read_text() == newer


def test_the_main_window_holds_the_panel_in_place_of_the_placeholder(window):
    index = next(i for i in range(window.tabs.count()) if window.tabs.tabText(i) == "Workloads")
    panel = window.workloads  # built on first use (or once the window has painted), in its tab's place
    assert window.tabs.widget(index) is panel and window.tabs.tabText(index) == "Workloads"
    assert WorkloadStore().list() == []


def test_an_unreachable_node_shows_on_its_rows_and_a_broken_record_is_told_once(panel_for, qtbot):
    from sparksync.core.base.errors import SparkSyncError

    cluster = FakeCluster(NODES)
    panel = panel_for(cluster)
    choose(panel, "llamacpp-single", ["spark-1"])
    view = start(qtbot, panel)
    wait_state(qtbot, panel, view.workload_id, "ready")
    errors = []
    panel.error_raised.connect(errors.append)

    def unreachable(node, action):
        raise SparkSyncError(f"{node} does not answer (connection refused)")

    cluster.call = unreachable
    name = "llamacpp-single-1.0.llama-server"
    wait_state(qtbot, panel, view.workload_id, "unreachable", name)
    panel.table.select(view.workload_id, name)
    assert "spark-1 does not answer" in panel.table.currentItem().text(4)
    assert errors == []  # shown on its row, not as an error every second

    write_atomic(WorkloadStore().path, "{not json")  # whole at once: a reading never sees it half written
    readings = []
    panel.jobs.finished.connect(lambda job: readings.append(job) if job == "Reading the workloads" else None)
    qtbot.waitUntil(lambda: len(readings) >= 4, timeout=WAIT_MS)
    assert (
        len(errors) == 1
        and errors[0].startswith("cannot read the workloads: ")
        and "Move it aside" in errors[0]
    )
