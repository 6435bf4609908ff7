"""``sparksync workload`` and ``engine`` without nodes: what is refused, and how it reads.

Starting, stopping and logs against real nodes are in tests/lab/test_workloads_lab.py.
"""

from __future__ import annotations

import json

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
