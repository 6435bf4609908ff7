"""One-node training baselines and the live scaling efficiency computed against them."""

from __future__ import annotations

import json

import pytest
from sparksync_agent.protocol import RankState

from sparksync.core.bench import published
from sparksync.core.workloads import running
from sparksync.core.workloads.baseline import (
    BASELINES_VERSION,
    Baseline,
    BaselineError,
    BaselineStore,
    key_of,
    setup_of,
)
from sparksync.core.workloads.training_scaling import NO_BASELINE, record_baselines, scaling
from tests.core.workloads.baseline_fakes import TrainingAgents, training_record


def live(agents: TrainingAgents):
    view = running.view(agents, agents.record)
    return view, running.tokens(agents, agents.record)


# --- the figure ---------------------------------------------------------------------------------


def test_the_published_nanochat_figure(tmp_path):
    # nanochat on 8 Sparks: 68,079 tok/s against 8,737 on one node.
    #   speed-up   = 68,079 / 8,737       = 7.7920  -> 7.79x
    #   efficiency = 68,079 / (8 x 8,737) = 68,079 / 69,896 = 0.97400 -> 97.4 %
    record, argv = training_record("w8", 8)
    agents = TrainingAgents(record, argv)
    for node in record.nodes():  # 'rank' figures add up: 8 x 8,509.875 = 68,079
        agents.history[node] = [68079 / 8]
    store = BaselineStore(tmp_path / "b.json")
    key = key_of("train", argv[record.nodes()[0]])
    store.set(key, 8737)

    [group] = scaling(*live(agents), store)
    assert group.nodes == 8 and group.key == key
    assert group.tokens_per_s == pytest.approx(68079)
    assert group.speedup == pytest.approx(7.7920, abs=1e-4)
    assert group.efficiency == pytest.approx(0.97400, abs=1e-5)
    assert round(group.efficiency, 3) == published.TRAINING_EFFICIENCY_8
    assert group.describe() == "97.4% (7.79x of 8,737 tok/s)"
    assert group.note is None


def test_without_a_baseline_it_says_run_it_on_one_node_first(tmp_path):
    record, argv = training_record("w2", 2)
    agents = TrainingAgents(record, argv)
    agents.history = {"spark-1": [900.0], "spark-2": [1000.0]}
    [group] = scaling(*live(agents), BaselineStore(tmp_path / "b.json"))
    assert group.tokens_per_s == 1900.0 and group.efficiency is None and group.speedup is None
    assert group.note.startswith(NO_BASELINE) and group.key in group.note
    assert group.describe() == group.note


def test_the_setup_key_is_the_same_on_one_and_on_n_nodes_and_differs_with_the_arguments():
    _, one = training_record("a", 1)
    _, four = training_record("b", 4)
    _, bigger = training_record("c", 1, args=["--batch", "64"])
    assert one["spark-1"][:2] == ["torchrun", "--standalone"]
    assert "--master_addr" in four["spark-3"]
    assert setup_of("train", one["spark-1"]) == "train: --nproc_per_node 1 train.py --batch 32"
    assert (
        key_of("train", one["spark-1"])
        == key_of("train", four["spark-1"])
        == key_of("train", four["spark-3"])
    )
    assert key_of("train", bigger["spark-1"]) != key_of("train", one["spark-1"])
    assert key_of("other", one["spark-1"]) != key_of("train", one["spark-1"])
    assert key_of("train", one["spark-1"]).startswith("train@")
    # the --opt=value spellings are placement too
    assert setup_of("t", ["torchrun", "--nnodes=2", "--rdzv-endpoint=h:1", "x.py"]) == "t: x.py"


# --- recorded from a one-node run ---------------------------------------------------------------


def test_a_one_node_run_records_the_median_when_it_ends_and_only_once(tmp_path):
    record, argv = training_record("w1", 1)
    agents = TrainingAgents(record, argv)
    # warm-up, gaps without a figure and one outlier: the median of 100, 510, 500, 490, 505, 2000 is 502.5
    agents.history["spark-1"] = [None, 100.0, 510.0, None, 500.0, 490.0, 505.0, 2000.0]
    store = BaselineStore(tmp_path / "b.json")

    assert record_baselines(agents, running.view(agents, record), store) == []  # still running
    assert agents.telemetry_reads == 0
    agents.state = RankState.exited
    [stored] = record_baselines(agents, running.view(agents, record), store)
    assert stored.tokens_per_s == 502.5 and stored.samples == 6 and stored.source == "measured"
    assert stored.workload_id == "w1" and stored.setup == "train: --nproc_per_node 1 train.py --batch 32"
    assert store.get(key_of("train", argv["spark-1"])) == stored

    assert record_baselines(agents, running.view(agents, record), store) == []  # done already
    assert agents.telemetry_reads == 1


def test_stopping_records_it_while_it_runs_and_the_newest_figure_wins(tmp_path):
    record, argv = training_record("w1", 1)
    agents = TrainingAgents(record, argv)
    agents.history["spark-1"] = [700.0, 710.0, 720.0]
    store = BaselineStore(tmp_path / "b.json")
    key = key_of("train", argv["spark-1"])
    store.set(key, 9999)
    [stored] = record_baselines(agents, running.view(agents, record), store, only_ended=False)
    assert store.get(key).tokens_per_s == 710.0 == stored.tokens_per_s
    assert [b.key for b in store.list()] == [key]
    assert store.set(key, 650).tokens_per_s == 650.0 and store.get(key).source == "user"
    assert store.get(key).setup == stored.setup  # a user's figure keeps the setup it stands for


def test_a_measured_baseline_keeps_its_nodes_id_and_software(tmp_path):
    record, argv = training_record("w1", 1)
    record = record.model_copy(update={"node_ids": {"spark-1": "a1b2c3d4e5f6a7b8"}})
    agents = TrainingAgents(record, argv, state=RankState.exited)
    agents.history["spark-1"] = [500.0]
    agents.torch["spark-1"] = "2.5.1"
    agents.agent_version["spark-1"] = "0.9.0"
    [stored] = record_baselines(agents, running.view(agents, record), BaselineStore(tmp_path / "b.json"))
    assert (stored.node_id, stored.node) == ("a1b2c3d4e5f6a7b8", "spark-1")  # the id, the name a label
    assert (stored.agent_version, stored.torch_version) == ("0.9.0", "2.5.1")


def test_without_an_id_in_the_record_the_agents_own_node_id_is_kept(tmp_path):
    record, argv = training_record("w1", 1)
    agents = TrainingAgents(record, argv, state=RankState.exited)
    agents.history["spark-1"] = [500.0]
    agents.node_id["spark-1"] = "0f0f0f0f0f0f0f0f"
    [stored] = record_baselines(agents, running.view(agents, record), BaselineStore(tmp_path / "b.json"))
    assert stored.node_id == "0f0f0f0f0f0f0f0f" and stored.torch_version is None  # no engine check yet


# --- the stale-baseline flag --------------------------------------------------------------------


def _two_node_run(tmp_path, **baseline):
    """A two-node run at 97.4 % of a measured baseline taken on 'id-one' with agent 0.9.0 and torch 2.5.1."""
    record, argv = training_record("w2", 2)
    record = record.model_copy(update={"node_ids": {"spark-1": "id-one", "spark-2": "id-two"}})
    agents = TrainingAgents(record, argv)
    agents.history = {"spark-1": [487.0], "spark-2": [487.0]}
    agents.torch = {"spark-1": "2.5.1", "spark-2": "2.5.1"}
    agents.agent_version = {"spark-1": "0.9.0", "spark-2": "0.9.0"}
    store = BaselineStore(tmp_path / "b.json")
    store.put(Baseline(**{"key": key_of("train", argv["spark-1"]), "tokens_per_s": 500.0, "source": "measured",
                          "node_id": "id-one", "node": "spark-1", "agent_version": "0.9.0",
                          "torch_version": "2.5.1", **baseline}))  # fmt: skip
    return agents, store


def test_the_same_nodes_and_software_are_not_flagged(tmp_path):
    agents, store = _two_node_run(tmp_path)
    [group] = scaling(*live(agents), store)
    assert group.efficiency == pytest.approx(0.974)
    assert group.flags == [] and group.flag is None
    assert "FLAGGED" not in group.describe()


def test_a_baseline_from_a_node_the_group_does_not_run_on_is_flagged(tmp_path):
    agents, store = _two_node_run(tmp_path, node_id="id-three", node="spark-3")
    [group] = scaling(*live(agents), store)
    [flag] = group.flags
    assert flag.kind == "stale_baseline"
    assert "it ran on spark-3, none of this group's nodes" in flag.reason
    assert "re-measure the one-node baseline" in flag.action
    assert "FLAGGED: stale baseline (it ran on spark-3, none of this group's nodes)" in group.describe()
    assert group.as_json()["flags"][0]["kind"] == "stale_baseline"


def test_a_baseline_under_other_software_is_flagged(tmp_path):
    agents, store = _two_node_run(tmp_path)
    agents.torch["spark-2"] = "2.6.0"
    agents.agent_version = {"spark-1": "1.0.0", "spark-2": "1.0.0"}
    [group] = scaling(*live(agents), store)
    [flag] = group.flags
    assert flag.kind == "stale_baseline"
    assert "SparkSync agent 0.9.0 then, 1.0.0 now" in flag.reason
    assert "torch 2.5.1 then, 2.5.1, 2.6.0 now" in flag.reason  # one of its nodes differs


def test_a_users_baseline_is_never_flagged_stale(tmp_path):
    agents, store = _two_node_run(tmp_path, source="user", node_id="id-three", agent_version="0.1.0")
    [group] = scaling(*live(agents), store)
    assert group.flags == []


def test_a_run_too_fast_for_a_stale_baseline_carries_both_flags(tmp_path):
    agents, store = _two_node_run(tmp_path, tokens_per_s=100.0, torch_version="2.4.0")
    [group] = scaling(*live(agents), store)
    assert [f.kind for f in group.flags] == ["efficiency_above_100", "stale_baseline"]
    assert group.flag.kind == "efficiency_above_100"
    text = group.describe()
    assert "FLAGGED: above 105%" in text and "FLAGGED: stale baseline (torch 2.4.0 then, 2.5.1 now)" in text


def test_a_run_on_two_nodes_or_without_figures_records_nothing(tmp_path):
    store = BaselineStore(tmp_path / "b.json")
    record, argv = training_record("w2", 2)
    agents = TrainingAgents(record, argv, state=RankState.exited)
    agents.history = {"spark-1": [1.0], "spark-2": [1.0]}
    assert record_baselines(agents, running.view(agents, record), store) == []
    record, argv = training_record("w1", 1)
    agents = TrainingAgents(record, argv, state=RankState.exited)
    assert record_baselines(agents, running.view(agents, record), store) == []
    assert store.list() == []


# --- the file -----------------------------------------------------------------------------------


def test_the_file_is_versioned_and_written_whole(tmp_path):
    path = tmp_path / "b.json"
    BaselineStore(path).set("train@12345678", 8737)
    data = json.loads(path.read_text())
    assert data["version"] == BASELINES_VERSION
    assert data["baselines"][0] | {"recorded_at": 0} == {
        "key": "train@12345678", "tokens_per_s": 8737.0, "source": "user", "setup": None,
        "workload_id": None, "samples": None, "recorded_at": 0,
        "node_id": None, "node": None, "agent_version": None, "torch_version": None,
    }  # fmt: skip
    assert path.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json", "b.json.lock"]  # no temp file left
    assert BaselineStore(path).get("train@12345678").tokens_per_s == 8737.0


def test_a_format_1_file_reads_and_the_next_write_is_format_2(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"version": 1, "baselines": [
        {"key": "train@1", "tokens_per_s": 500.0, "source": "measured", "setup": "train: x",
         "workload_id": "w1", "samples": 3, "recorded_at": 10.0},
    ]}))  # fmt: skip
    store = BaselineStore(path)
    [old] = store.list()
    assert (old.tokens_per_s, old.workload_id, old.node_id, old.agent_version) == (500.0, "w1", None, None)
    store.set("train@2", 700)
    data = json.loads(path.read_text())
    assert data["version"] == BASELINES_VERSION == 2
    assert [b["key"] for b in data["baselines"]] == ["train@1", "train@2"]
    assert data["baselines"][0]["samples"] == 3 and data["baselines"][0]["node_id"] is None


def test_a_newer_file_is_never_overwritten(tmp_path):
    path = tmp_path / "b.json"
    newer = json.dumps({"version": BASELINES_VERSION + 1, "baselines": [{"key": "x", "future": True}]})
    path.write_text(newer)
    store = BaselineStore(path)
    with pytest.raises(BaselineError, match="newer SparkSync"):
        store.set("train@12345678", 1.0)
    with pytest.raises(BaselineError, match="newer SparkSync"):
        store.put(Baseline(key="train@1", tokens_per_s=1.0, source="measured"))
    with pytest.raises(BaselineError, match="newer SparkSync"):
        store.list()
    assert path.read_text() == newer


def test_a_broken_file_and_bad_figures_are_clear_errors(tmp_path):
    path = tmp_path / "b.json"
    path.write_text("{not json")
    with pytest.raises(BaselineError, match="not a valid baseline file"):
        BaselineStore(path).list()
    store = BaselineStore(tmp_path / "ok.json")
    with pytest.raises(BaselineError, match="positive tokens/s"):
        store.set("train@1", 0)
    with pytest.raises(BaselineError, match="not a baseline key"):
        store.set("train", 10)


def test_an_unreadable_file_never_stops_the_figures_or_a_stop(tmp_path):
    from sparksync.core.workloads.training_scaling import record_before_stop

    path = tmp_path / "b.json"
    newer = json.dumps({"version": BASELINES_VERSION + 1, "baselines": []})
    path.write_text(newer)
    record, argv = training_record("w2", 2)
    agents = TrainingAgents(record, argv)
    agents.history = {"spark-1": [10.0], "spark-2": [20.0]}
    [group] = scaling(*live(agents), BaselineStore(path))
    assert group.tokens_per_s == 30.0 and group.efficiency is None and "newer SparkSync" in group.note

    record, argv = training_record("w1", 1)
    agents = TrainingAgents(record, argv)
    agents.history = {"spark-1": [10.0]}
    assert record_before_stop(agents, record, BaselineStore(path)) == []
    assert path.read_text() == newer
    [stored] = record_before_stop(agents, record, BaselineStore(tmp_path / "ok.json"))
    assert stored.tokens_per_s == 10.0
