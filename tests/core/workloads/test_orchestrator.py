"""The orchestrator against agent-shaped fakes: stage order, all-or-nothing, cancel, memory refusal.

The real path (real agents, engines and SSH) is tests/lab/test_workloads_lab.py.
"""

from __future__ import annotations

import threading

import pytest

from sparksync.core.base.errors import AgentRequestError
from sparksync.core.planner.model import ModelSpec
from sparksync.core.workloads import running
from sparksync.core.workloads.errors import MemoryFitError
from sparksync.core.workloads.launch_request import resolve
from sparksync.core.workloads.orchestrator import Orchestrator, WorkloadCancelled, WorkloadStartError
from sparksync.core.workloads.recipe import MemoryNeeds
from sparksync.core.workloads.workload_store import WorkloadStore
from tests.core.workloads.fake_agents import FakeCluster

NODES = ["spark-1", "spark-2", "spark-3"]
RPC = {"model": "/models/m.gguf"}


def orchestrate(cluster: FakeCluster, events: list | None = None) -> Orchestrator:
    on_progress = events.append if events is not None else None
    return Orchestrator(cluster, WorkloadStore(), on_progress=on_progress, poll_s=0.001)


def test_stage_one_starts_only_after_every_stage_zero_rank_is_ready():
    cluster = FakeCluster(NODES)
    events = []
    orchestrator = orchestrate(cluster, events)
    plan, recipes = resolve("llamacpp-rpc", NODES, None, RPC)
    view = orchestrator.start(orchestrator.prepare(plan, recipes))

    assert view.state == "ready"
    order = [(node, what) for node, what, _name in cluster.calls if what in ("start", "ready")]
    head_start = order.index(("spark-1", "start"))
    assert {("spark-2", "ready"), ("spark-3", "ready")} <= set(order[:head_start])
    assert [e.event for e in events if e.name == "llamacpp-rpc-1.0.llama-server"] == [
        "starting",
        "started",
        "ready",
    ]
    # A new process reads the same workload from the record.
    [record] = WorkloadStore().list()
    assert record.workload_id == view.workload_id and record.nodes() == ["spark-2", "spark-3", "spark-1"]
    assert [e.port for e in record.endpoints] == [8080]


def test_a_refused_rank_stops_every_node_and_names_the_rank():
    cluster = FakeCluster(NODES)
    cluster.refuse["llamacpp-rpc-1.0.llama-server"] = AgentRequestError(
        "port 8080 is already in use on this node", status=409, code="port_in_use"
    )
    orchestrator = orchestrate(cluster)
    plan, recipes = resolve("llamacpp-rpc", NODES, None, RPC)
    with pytest.raises(WorkloadStartError) as caught:
        orchestrator.start(orchestrator.prepare(plan, recipes))

    message = str(caught.value)
    assert "rank 0 (llama-server)" in message and "spark-1" in message and "port 8080" in message
    assert caught.value.rank.node == "spark-1"
    assert sorted(node for node, _ in cluster.what("stop")) == sorted(NODES)
    assert all(s.state.value == "stopped" for c in cluster.clients.values() for w in c.ranks.values()
               for s in w.values())  # fmt: skip


def test_a_rank_that_fails_while_starting_is_reported_with_its_last_lines():
    cluster = FakeCluster(NODES)
    cluster.fail_roles.add("rpc-server")
    orchestrator = orchestrate(cluster)
    plan, recipes = resolve("llamacpp-rpc", NODES, None, RPC)
    with pytest.raises(WorkloadStartError) as caught:
        orchestrator.start(orchestrator.prepare(plan, recipes))

    assert "exited with status 1" in str(caught.value) and "error: out of memory" in str(caught.value)
    assert caught.value.lines == ["loading", "error: out of memory"]
    assert ("spark-1", "llamacpp-rpc-1.0.llama-server") not in cluster.what("start")  # never reached stage 1
    assert sorted(node for node, _ in cluster.what("stop")) == sorted(NODES)
    [record] = WorkloadStore().list()  # kept, so its logs can be read
    assert running.view(cluster, record).state == "failed"


def test_cancel_while_waiting_stops_what_was_started():
    cluster = FakeCluster(NODES, ready_after=10**9)  # never ready
    cancel = threading.Event()
    cluster.on_status = cancel.set
    orchestrator = orchestrate(cluster)
    plan, recipes = resolve("llamacpp-rpc", NODES, None, RPC)
    with pytest.raises(WorkloadCancelled):
        orchestrator.start(orchestrator.prepare(plan, recipes), cancel)
    assert sorted(node for node, _ in cluster.what("stop")) == sorted(NODES)


def test_ctrl_c_while_waiting_stops_what_was_started():
    cluster = FakeCluster(NODES, ready_after=10**9)

    def interrupt() -> None:
        raise KeyboardInterrupt

    cluster.on_status = interrupt
    orchestrator = orchestrate(cluster)
    plan, recipes = resolve("llamacpp-rpc", NODES, None, RPC)
    with pytest.raises(WorkloadCancelled, match="stopped"):
        orchestrator.start(orchestrator.prepare(plan, recipes))
    assert sorted(node for node, _ in cluster.what("stop")) == sorted(NODES)


def test_a_model_that_does_not_fit_is_refused_with_the_numbers_before_anything_starts():
    cluster = FakeCluster(NODES, free_gb=10.0)
    needs = MemoryNeeds(model=ModelSpec(name="big", params=70e9, quant="bf16"))
    plan, recipes = resolve("llamacpp-rpc", NODES, None, {**RPC, "memory": needs.model_dump()})
    with pytest.raises(MemoryFitError) as caught:
        orchestrate(cluster).prepare(plan, recipes)
    assert "GB" in str(caught.value) and "spark-1" in str(caught.value)
    assert not cluster.what("start")


def test_a_failed_rank_while_running_stops_the_others():
    cluster = FakeCluster(NODES)
    orchestrator = orchestrate(cluster)
    plan, recipes = resolve("llamacpp-rpc", NODES, None, RPC)
    view = orchestrator.start(orchestrator.prepare(plan, recipes))
    head = cluster.clients["spark-1"].ranks[view.workload_id]["llamacpp-rpc-1.0.llama-server"]
    head.state, head.message = head.state.failed, "killed by signal 9 (SIGKILL)"

    final = running.watch(cluster, view.record, threading.Event(), poll_s=0.001)
    assert final.state == "failed"
    assert {r.ref.role: r.state for r in final.ranks} == {"rpc-server": "stopped", "llama-server": "failed"}
    assert sorted(node for node, _ in cluster.what("stop")) == ["spark-2", "spark-3"]




def test_an_applied_fabric_plan_gives_each_rank_its_stored_environment_and_address(tmp_path):
    from sparksync.core.fabric import FabricStore, PlanState, build_cabling, classify, make_plan
    from tests.core.fabric.reports import Cabling

    reports = Cabling(NODES).ring().reports()
    plan = make_plan(classify(build_cabling(reports)), reports)
    store = FabricStore(tmp_path / "cluster_fabric.json")
    store.save_plan(plan, PlanState.applied)
    cluster = FakeCluster(NODES)
    orchestrator = Orchestrator(cluster, WorkloadStore(), fabric_store=store, poll_s=0.001)
    plan_, recipes = resolve("llamacpp-rpc", NODES, None, RPC)
    prepared = orchestrator.prepare(plan_, recipes)
    ranks = {r.node: r for g in prepared.groups for r in g.ranks}
    for node in NODES:
        env = ranks[node].env
        for key, value in plan.env(node).items():
            assert env[key] == value, (node, key)
        assert env["NCCL_IB_HCA"] == "rocep1s0f0,roceP2p1s0f0,rocep1s0f1,roceP2p1s0f1"
    # The head reaches each rpc-server at that node's planned fabric address.
    head = " ".join(ranks["spark-1"].argv)
    assert all(plan.node(n).fabric_ip in head for n in ("spark-2", "spark-3")), head


def test_a_planned_but_not_applied_fabric_changes_nothing(tmp_path):
    from sparksync.core.fabric import FabricStore, build_cabling, classify, make_plan
    from tests.core.fabric.reports import Cabling

    reports = Cabling(NODES).ring().reports()
    store = FabricStore(tmp_path / "cluster_fabric.json")
    store.save_plan(make_plan(classify(build_cabling(reports)), reports))  # planned only
    orchestrator = Orchestrator(FakeCluster(NODES), WorkloadStore(), fabric_store=store, poll_s=0.001)
    plan_, recipes = resolve("llamacpp-rpc", NODES, None, RPC)
    ranks = [r for g in orchestrator.prepare(plan_, recipes).groups for r in g.ranks]
    assert not any("10.100." in " ".join(r.argv) for r in ranks)  # the nodes' reported addresses are used
