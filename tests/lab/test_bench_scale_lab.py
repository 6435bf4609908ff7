"""The scale sweep on lab nodes: llama.cpp over RPC on 1, 2 and 4 nodes, each started through the agents.

Every size is a real workload (``WorkloadBringUp``): rpc-servers on the
other nodes over the fabric link, llama-server on the head, reached through
an SSH tunnel, measured by the pinned llama-benchy with a tiny profile, then
stopped before the next size. The history holds one run per size under one
sweep id, and the report has the three sizes.
"""

from __future__ import annotations

import json

import pytest

from sparksync.core.bench.exports import export_text
from sparksync.core.bench.history import HistoryStore
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.scale import ScaleSweep
from sparksync.core.bench.workload_sweep import SweepWorkload, WorkloadBringUp
from sparksync.core.workloads.orchestrator import Orchestrator
from sparksync.core.workloads.reach import TunnelReach
from sparksync.core.workloads.workload_store import WorkloadStore
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.test_fleet_lab import (  # noqa: F401  (fixtures)
    agent_python,
    cli_env,
    client_key,
    lab_agents,
    open_fleet,
    sparksync,
)
from tests.lab.test_workloads_lab import (  # noqa: F401  (fixtures)
    SPLIT_MODEL,
    binaries,
    cluster,
    llama_overrides,
    no_processes_left,
    shared,
)
from tests.lab.workload_lab import wait_fabric_reported

pytestmark = [pytest.mark.lab, pytest.mark.engine]

# Small: the check is the path, not the speed. llama-benchy drops a run's decode figure when all its
# tokens arrive in one read, which a tiny model on one node can do even with 128 tokens (exact_tg)
# through a tunnel; three runs per size keep a figure.
PROFILE = BenchProfile.build(pp=(32,), tg=(128,), runs=3, warmup=False, exact_tg=True)


def test_a_sweep_over_one_two_and_four_lab_nodes_reports_three_sizes(
    lab_agents,  # noqa: F811
    client_key,  # noqa: F811
    binaries,  # noqa: F811
    shared,  # noqa: F811
):
    ssh_lab, agents, _fabric = cluster(lab_agents, 4, fabric=True)
    names = [node.name for node in ssh_lab.nodes]
    tokenizer = shared.path / f"{SPLIT_MODEL.name}.tokenizer.json"
    history = HistoryStore()
    store = WorkloadStore()
    with open_fleet(ssh_lab, client_key) as fleet:
        nodes_agents = fleet
        wait_fabric_reported(nodes_agents, names)
        workload = SweepWorkload("llamacpp-rpc", names, "tiny", tokenizer, llama_overrides(binaries, shared),
                                 topology="switch")  # fmt: skip
        bring_up = WorkloadBringUp(Orchestrator(nodes_agents, store), TunnelReach(fleet), workload)
        sweep = ScaleSweep(bring_up, history, available_nodes=len(names), profile=PROFILE)
        bring_up.check(sweep.sizes)
        result = sweep.run()

    assert result.skipped == {}, result.skipped
    assert len(bring_up.started) == 3 and len(set(bring_up.started)) == 3  # a workload per size
    assert store.list() == []  # each stopped and forgotten once measured
    assert [r.context.cluster_size for r in result.records] == [1, 2, 4]
    assert [r.status for r in result.records] == ["complete"] * 3, [r.error for r in result.records]
    contexts = [r.context for r in result.records]
    assert [c.nodes for c in contexts] == [tuple(names[:1]), tuple(names[:2]), tuple(names)]
    assert [c.topology for c in contexts] == ["single", "switch", "switch"]
    assert [c.collective_backend for c in contexts] == [None, "rpc", "rpc"]
    assert {c.recipe for c in contexts} == {"llamacpp-rpc"} and {c.engine for c in contexts} == {"llama.cpp"}
    stored = history.list_runs(sweep_id=result.sweep_id)
    assert sorted(item.cluster_size for item in stored) == [1, 2, 4]
    report = result.report
    assert [row.cluster_size for row in report.rows] == [1, 2, 4]
    assert all(row.throughput and row.throughput > 0 for row in report.rows), report.rows
    assert report.rows[0].speedup == pytest.approx(1.0)
    table = export_text(report, "md")
    assert "| 4 |" in table
    print("\n" + table)
    no_processes_left(ssh_lab, agents)


def test_the_cli_sweeps_paired_lab_nodes_and_stores_the_sweep(
    lab_agents,  # noqa: F811
    client_key,  # noqa: F811
    real_keyring,  # noqa: F811
    binaries,  # noqa: F811
    shared,  # noqa: F811
):
    """``sparksync bench scale`` as its own process: every paired node by default, a JSON report."""
    ssh_lab, agents, _fabric = cluster(lab_agents, 2, fabric=True)
    names = [node.name for node in ssh_lab.nodes]
    with open_fleet(ssh_lab, client_key) as fleet:
        wait_fabric_reported(fleet, names)
    overrides = llama_overrides(binaries, shared)
    env = cli_env(real_keyring)
    result = sparksync(
        ssh_lab, env, "bench", "scale", "--model", overrides["model"], "--served-name", "tiny",
        "--tokenizer", str(shared.path / f"{SPLIT_MODEL.name}.tokenizer.json"),
        f"--set=llamacpp={json.dumps(overrides['llamacpp'])}", "--http-port", "8080",
        "--pp", "32", "--tg", "128", "--exact-tg", "--runs", "3", "--no-warmup", "--format", "json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [row["cluster_size"] for row in report["rows"]] == [1, 2]
    assert [row["collective_backend"] for row in report["rows"]] == [None, "rpc"]
    assert "stored as sweep" in result.stderr and "ready" in result.stderr
    listed = json.loads(sparksync(ssh_lab, env, "workload", "list", "--json").stdout)["workloads"]
    assert listed == []  # both sizes stopped and forgotten
    no_processes_left(ssh_lab, agents)
