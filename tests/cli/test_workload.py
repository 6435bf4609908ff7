"""``sparksync workload`` and ``engine`` without nodes: what is refused, and how it reads.

Starting, stopping and logs against real nodes are in tests/lab/test_workloads_lab.py.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.workloads.plan import Group, Plan
from sparksync.core.workloads.workload_store import RankRef, WorkloadRecord, WorkloadStore


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_an_empty_list_reads_plainly_and_as_json():
    assert "no workloads" in invoke("workload", "list").output
    assert json.loads(invoke("workload", "list", "--json").output) == {"workloads": []}


def test_an_unknown_workload_is_one_clear_line():
    result = invoke("workload", "stop", "nope")
    assert result.exit_code == 4
    assert result.output.strip().startswith("sparksync: error: no workload 'nope'")


def test_follow_wants_one_process():
    plan = Plan(groups=[Group(recipe="r", nodes=["a", "b"])])
    ranks = [RankRef(node=n, name=f"r-1.{i}.x", group="r-1", rank=i, role="x") for i, n in enumerate("ab")]
    WorkloadStore().add(WorkloadRecord(workload_id="w1", recipes=["r"], plan=plan, ranks=ranks))
    result = invoke("workload", "logs", "w1", "--follow")
    assert result.exit_code == 2 and "--rank" in result.output and "r-1.0.x, r-1.1.x" in result.output


def test_bad_launch_requests_are_refused_before_any_node_is_asked():
    result = invoke("workload", "start", "llamacpp-single")
    assert result.exit_code == 2 and "--nodes a,b,... or --plan FILE" in result.output
    result = invoke("workload", "start", "llamacpp-single", "--nodes", "a", "--set", "llamacpp.thread=2")
    assert result.exit_code == 2 and "llamacpp.thread" in result.output
    result = invoke("workload", "start", "no-such-recipe", "--nodes", "a")
    assert result.exit_code == 2 and "no recipe named 'no-such-recipe'" in result.output


# --- training scaling against the one-node baseline ---------------------------------------------


def _fake_nodes(monkeypatch, agents) -> None:
    from contextlib import contextmanager

    import sparksync.cli.workload as workload_cli
    from sparksync.core.workloads import WorkloadControl

    @contextmanager
    def fake():
        yield WorkloadControl(lambda: agents)  # the core's service, over agents the test scripts

    monkeypatch.setattr(workload_cli, "_control", fake)


def test_list_shows_the_efficiency_of_a_training_run_against_its_baseline(monkeypatch):
    from sparksync.core.workloads.baseline import key_of
    from tests.core.workloads.baseline_fakes import TrainingAgents, training_record

    record, argv = training_record("train-w", 2)
    WorkloadStore().add(record)
    agents = TrainingAgents(record, argv)
    agents.history = {"spark-1": [900.0], "spark-2": [1000.0]}  # 1,900 tok/s together
    _fake_nodes(monkeypatch, agents)
    key = key_of("train", argv["spark-1"])

    before = invoke("workload", "list")
    assert before.exit_code == 0, before.output
    assert "no one-node baseline yet: run it on one node first" in before.output and key in before.output

    assert invoke("workload", "baseline", "set", key, "1000").output.strip() == (
        f"one-node baseline {key}: 1,000.0 tok/s"
    )
    # 1,900 / (2 x 1,000) = 95.0 %, speed-up 1,900 / 1,000 = 1.90x
    text = invoke("workload", "list").output
    assert text.splitlines()[0].split() == ["ID", "STATE", "NODES", "TOK/S", "SCALING"]
    assert "train-w  ready  spark-1,spark-2  1,900.0  95.0% (1.90x of 1,000 tok/s)" in text
    [doc] = json.loads(invoke("workload", "list", "--json").output)["workloads"]
    [group] = doc["scaling"]
    assert group["efficiency"] == pytest.approx(0.95) and group["speedup"] == pytest.approx(1.9)
    assert group | {"efficiency": 0, "speedup": 0} == {
        "group": "train-1", "recipe": "train", "nodes": 2, "baseline_key": key,
        "setup": "train: --nproc_per_node 1 train.py --batch 32", "tokens_per_s": 1900.0,
        "baseline_tokens_per_s": 1000.0, "baseline_source": "user", "efficiency": 0, "speedup": 0, "note": None,
        "flag": None, "flags": [], "baseline_node_id": None, "baseline_agent_version": None,
        "baseline_torch_version": None,
    }  # fmt: skip


def test_stopping_a_one_node_training_run_records_its_baseline(monkeypatch):
    from tests.core.workloads.baseline_fakes import TrainingAgents, training_record

    record, argv = training_record("one", 1)
    WorkloadStore().add(record)
    agents = TrainingAgents(record, argv)
    agents.history = {"spark-1": [600.0, 640.0, 620.0]}
    _fake_nodes(monkeypatch, agents)
    result = invoke("workload", "stop", "one")
    assert result.exit_code == 0, result.output
    assert "one-node baseline train@" in result.output and "620.0 tok/s" in result.output
    shown = invoke("workload", "baseline", "show").output.splitlines()
    assert shown[0].split()[:4] == ["KEY", "TOK/S", "SOURCE", "RECORDED"]
    assert "620.0  measured (one)" in shown[1]
    assert shown[1].endswith("train: --nproc_per_node 1 train.py --batch 32")
    [doc] = json.loads(invoke("workload", "baseline", "show", "--json").output)["baselines"]
    assert doc["tokens_per_s"] == 620.0 and doc["samples"] == 3


def test_baseline_commands_read_plainly_when_empty_or_wrong():
    assert "no one-node baselines yet" in invoke("workload", "baseline", "show").output
    result = invoke("workload", "baseline", "set", "train", "10")
    assert result.exit_code == 1
    assert result.output.startswith("sparksync: error: 'train' is not a baseline key")
    result = invoke("workload", "baseline", "set", "train@1", "-5")
    assert result.exit_code != 0


def test_watch_records_the_baseline_of_a_one_node_run_that_ended(monkeypatch):
    from sparksync_agent.protocol import RankState

    from tests.core.workloads.baseline_fakes import TrainingAgents, training_record

    record, argv = training_record("ended", 1)
    WorkloadStore().add(record)
    agents = TrainingAgents(record, argv, state=RankState.exited)
    agents.history = {"spark-1": [300.0, 500.0]}
    _fake_nodes(monkeypatch, agents)
    result = invoke("workload", "watch", "ended")
    assert result.exit_code == 0, result.output
    assert "400.0 tok/s (median of 2 figures)" in result.output
    assert result.output.strip().endswith("workload ended: exited")


def test_an_efficiency_above_105_percent_is_flagged_with_what_to_do(monkeypatch):
    from sparksync.core.workloads.baseline import key_of
    from tests.core.workloads.baseline_fakes import TrainingAgents, training_record

    record, argv = training_record("train-busy", 2)
    WorkloadStore().add(record)
    agents = TrainingAgents(record, argv)
    agents.history = {"spark-1": [3388.0], "spark-2": [3388.0]}  # 6,776 tok/s against a baseline of 1,000
    _fake_nodes(monkeypatch, agents)
    key = key_of("train", argv["spark-1"])
    invoke("workload", "baseline", "set", key, "1000")

    text = invoke("workload", "list").output
    assert "338.8% (6.78x of 1,000 tok/s) FLAGGED: above 105%, re-measure the baseline" in text, text
    [group] = json.loads(invoke("workload", "list", "--json").output)["workloads"][0]["scaling"]
    assert group["flag"]["kind"] == "efficiency_above_100"
    assert "re-measure the one-node baseline" in group["flag"]["action"]


def test_a_baseline_measured_under_other_software_is_flagged_with_what_to_do(monkeypatch):
    from sparksync_agent.protocol import RankState

    from sparksync.core.workloads.baseline import BaselineStore, key_of
    from tests.core.workloads.baseline_fakes import TrainingAgents, training_record

    # The baseline: a one-node run with torch 2.5.1, recorded when it ended.
    solo, solo_argv = training_record("solo", 1)
    WorkloadStore().add(solo)
    one = TrainingAgents(solo, solo_argv, state=RankState.exited)
    one.history, one.torch = {"spark-1": [1000.0]}, {"spark-1": "2.5.1"}
    _fake_nodes(monkeypatch, one)
    assert invoke("workload", "watch", "solo").exit_code == 0
    [stored] = BaselineStore().list()
    assert stored.source == "measured" and stored.torch_version == "2.5.1"

    # The same training on two nodes that run torch 2.6.0 now.
    record, argv = training_record("train-new", 2)
    assert key_of("train", argv["spark-1"]) == stored.key  # the same setup, placed otherwise
    WorkloadStore().add(record)
    two = TrainingAgents(record, argv)
    two.history, two.torch = {"spark-1": [950.0], "spark-2": [950.0]}, {"spark-1": "2.6.0", "spark-2": "2.6.0"}
    _fake_nodes(monkeypatch, two)

    text = invoke("workload", "list").output
    assert ("95.0% (1.90x of 1,000 tok/s) FLAGGED: stale baseline (torch 2.5.1 then, 2.6.0 now), "
            "re-measure it on one of these nodes with this software") in text, text
    docs = json.loads(invoke("workload", "list", "--json").output)["workloads"]
    [group] = next(d for d in docs if d["workload_id"] == "train-new")["scaling"]
    assert group["flag"]["kind"] == "stale_baseline" and group["baseline_torch_version"] == "2.5.1"
    assert "torch 2.5.1 then, 2.6.0 now" in group["flag"]["reason"]
    assert "re-measure the one-node baseline" in group["flag"]["action"]

    # A figure the user sets says nothing of where it came from: no stale flag.
    invoke("workload", "baseline", "set", stored.key, "1000")
    assert "FLAGGED" not in invoke("workload", "list").output


def test_a_workload_failed_over_an_hour_ago_leaves_the_default_list_and_prune_drops_it(monkeypatch):
    import time

    from sparksync_agent.protocol import RankState
    from tests.core.workloads.baseline_fakes import TrainingAgents, training_record

    old, _ = training_record("old-fail", 1)
    old = old.model_copy(update={"created_at": time.time() - 7200})  # no rank says when it ended
    recent, argv = training_record("new-fail", 1)
    for record in (old, recent):
        WorkloadStore().add(record)
    agents = {w.record.workload_id: w for w in (TrainingAgents(old, argv, state=RankState.failed),
                                                  TrainingAgents(recent, argv, state=RankState.failed))}
    agents["old-fail"].history = {"spark-1": [450.0, None]}  # its node's telemetry still holds its last figure

    class Client:  # one node running both: each workload's status, and the old one's telemetry
        def __init__(self, node):
            self.node = node

        def of(self, workload_id):
            return agents[workload_id].call(self.node, lambda client: client)

        def workload(self, workload_id):
            return self.of(workload_id).workload(workload_id)

        def forget_workload(self, workload_id):
            return self.of(workload_id).forget_workload(workload_id)

        def telemetry(self, since, limit=None):
            return self.of("old-fail").telemetry(since, limit)

        def snapshot(self):
            return self.of("old-fail").snapshot()

    class Both:
        def call(self, node, action):
            return action(Client(node))

    _fake_nodes(monkeypatch, Both())
    text = invoke("workload", "list").output
    assert "new-fail" in text and "old-fail" not in text.split("(")[0], text
    assert "1 failed or gone for more than an hour not shown" in text
    shown = json.loads(invoke("workload", "list", "--all", "--json").output)
    assert [w["workload_id"] for w in shown["workloads"]] == ["old-fail", "new-fail"]
    assert shown["workloads"][0]["last_decode_tps"] == 450.0
    assert invoke("workload", "prune").output.split() == ["dropped", "old-fail", "dropped", "new-fail"]
    assert WorkloadStore().list() == []
