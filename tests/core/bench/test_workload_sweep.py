"""A sweep's sizes as workloads: started on the first n nodes, measured, stopped and forgotten; failures skipped.

The orchestrator and agents here are fakes that record what they were asked;
the benchmark itself is the real llama-benchy against the fake OpenAI server
(``make_fake``). The same on lab nodes with real agents and llama.cpp is
tests/lab/test_bench_scale_lab.py.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from sparksync.core.bench.errors import BenchInputError
from sparksync.core.bench.history import HistoryStore
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.scale import ScaleSweep
from sparksync.core.bench.workload_sweep import SweepWorkload, WorkloadBringUp
from sparksync.core.workloads.errors import WorkloadError
from sparksync.core.workloads.workload_store import Endpoint, RankRef, WorkloadRecord, WorkloadStore

PROFILE = BenchProfile.build(pp=(64,), tg=(24,), runs=1)
NODES = ["n1", "n2", "n3", "n4"]


class FakeClient:
    def __init__(self, log: list, node: str):
        self.log, self.node = log, node

    def stop_workload(self, workload_id: str, grace_s: float) -> None:
        self.log.append(("stop", self.node, workload_id))

    def forget_workload(self, workload_id: str) -> None:
        self.log.append(("forget", self.node, workload_id))


class FakeAgents:
    def __init__(self):
        self.log: list = []

    def call(self, node, action):
        return action(FakeClient(self.log, node))


class FakeView:
    def __init__(self, record: WorkloadRecord):
        self.record, self.workload_id = record, record.workload_id


class FakeOrchestrator:
    """Starts nothing: records the plan, and fails the sizes in ``refuse``."""

    def __init__(self, store: WorkloadStore, refuse: set[int] = frozenset()):
        self.agents, self.store, self.refuse = FakeAgents(), store, refuse
        self.plans: list = []

    def prepare(self, plan, recipes, label=None):
        self.plans.append(plan)
        return plan, label

    def start(self, prepared):
        plan, label = prepared
        nodes = plan.nodes()
        if len(nodes) in self.refuse:
            raise WorkloadError(f"rank 0 (llama-server) on {nodes[0]} failed: port 8080 is taken")
        record = WorkloadRecord(
            workload_id=f"{label}-x", recipes=[g.recipe for g in plan.groups], plan=plan,
            ranks=[RankRef(node=n, name=f"g.{i}.r", group="g", rank=i, role="r") for i, n in enumerate(nodes)],
            endpoints=[Endpoint(group="llamacpp-rpc-1", node=nodes[0], host="127.0.0.1", port=8080)],
        )  # fmt: skip
        self.store.add(record)
        return FakeView(record)


def reach_to(server):
    opened = []

    @contextmanager
    def reach(endpoint: Endpoint):
        opened.append(endpoint.node)
        yield server.base_url.removesuffix("/v1")

    return reach, opened


def sweep_workload(tokenizer) -> SweepWorkload:
    return SweepWorkload("llamacpp-rpc", NODES, "tiny-fake", tokenizer,
                         {"model": "/models/tiny.gguf", "served_name": "tiny-fake"}, topology="ring")  # fmt: skip


def test_a_recipe_that_cannot_run_at_a_size_is_refused_before_anything_starts(tokenizer_json, tmp_path):
    orchestrator = FakeOrchestrator(WorkloadStore(tmp_path / "w.json"))
    server = type("S", (), {"base_url": "http://127.0.0.1:9/v1"})()
    bring_up = WorkloadBringUp(orchestrator, reach_to(server)[0], sweep_workload(tokenizer_json))
    with pytest.raises(BenchInputError, match="8 nodes asked for, but only 4 were given"):
        bring_up.check([1, 2, 8])
    single = WorkloadBringUp(
        orchestrator,
        reach_to(server)[0],
        SweepWorkload("custom", NODES, "m", tokenizer_json, {"custom": {"argv": ["serve"]}}),
    )
    with pytest.raises(BenchInputError, match="does not run as one replica on 2"):
        single.check([1, 2])
    assert orchestrator.plans == []


@pytest.mark.slow
def test_each_size_is_started_measured_stopped_and_a_refused_size_is_skipped(
    make_fake, tokenizer_json, tmp_path
):
    store = WorkloadStore(tmp_path / "w.json")
    orchestrator = FakeOrchestrator(store, refuse={2})
    server = make_fake()
    reach, opened = reach_to(server)
    bring_up = WorkloadBringUp(orchestrator, reach, sweep_workload(tokenizer_json))
    history = HistoryStore(tmp_path / "h.sqlite3")
    result = ScaleSweep(bring_up, history, available_nodes=4, profile=PROFILE).run()

    assert [p.nodes() for p in orchestrator.plans] == [["n1"], ["n1", "n2"], NODES]
    assert list(result.skipped) == [2] and "port 8080 is taken" in result.skipped[2]
    assert opened == ["n1", "n1"]  # the head of each started size
    assert [r.context.cluster_size for r in result.records] == [1, 4]
    ctx1, ctx4 = (r.context for r in result.records)
    assert (ctx1.topology, ctx1.collective_backend, ctx1.nodes) == ("single", None, ("n1",))
    assert (ctx4.topology, ctx4.collective_backend, ctx4.nodes) == ("ring", "rpc", tuple(NODES))
    assert ctx4.recipe == "llamacpp-rpc" and ctx4.engine == "llama.cpp" and ctx4.sweep_id == result.sweep_id
    calls = orchestrator.agents.log  # the nodes of one step are asked at once, in any order
    assert calls[:2] == [("stop", "n1", "bench-scale-1-x"), ("forget", "n1", "bench-scale-1-x")]
    assert sorted(calls[2:6]) == [("stop", n, "bench-scale-4-x") for n in NODES]
    assert sorted(calls[6:]) == [("forget", n, "bench-scale-4-x") for n in NODES]
    assert store.list() == []
    assert [row.cluster_size for row in result.report.rows] == [1, 4]
