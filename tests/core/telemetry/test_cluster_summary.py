"""The tray's one-line summary and the cluster's health."""

from __future__ import annotations

from sparksync.core.telemetry.cluster_summary import ClusterSummary, Health, summarize
from sparksync.core.nodes.rows import NodeRow, NodeState
from sparksync.core.base.units import MemoryUnit


def row(name: str, state: NodeState) -> NodeRow:
    return NodeRow(f"paired:{name}", name, "10.0.0.1", state, None, None, True)


def test_the_text_reads_like_the_issue_example():
    assert ClusterSummary(6, 8, 412e9, 38.0).text() == "6/8 online, 412 GB used, 38 tok/s"
    assert ClusterSummary(1, 1, 2**30 * 10, None).text(MemoryUnit.GIB) == "1/1 online, 10 GiB used"


def test_online_counts_fleet_states_and_fresh_telemetry():
    rows = [row("a", NodeState.ONLINE), row("b", NodeState.OFFLINE), row("c", NodeState.PAIRED)]
    summary = summarize(rows, {"c": 995.0, "this computer": 900.0}, 1e9, None, now=1000.0)
    assert (summary.online, summary.total) == (2, 4)  # a by its state, c by its fresh sample
    assert summary.health is Health.DEGRADED


def test_health():
    assert ClusterSummary(0, 0, None, None).health is Health.OFFLINE
    assert ClusterSummary(0, 3, None, None).health is Health.OFFLINE
    assert ClusterSummary(3, 3, None, None).health is Health.ONLINE
    assert ClusterSummary(3, 3, None, None, degraded=1).health is Health.DEGRADED


def test_with_a_spark_paired_this_computer_is_not_counted():
    rows = [row("spark-1", NodeState.ONLINE)]
    fresh = {"spark-1": 999.0, "this computer": 999.0}
    summary = summarize(rows, fresh, 2e9, None, now=1000.0, apart=["this computer"])
    assert (summary.online, summary.total) == (1, 1) and summary.text() == "1/1 online, 2 GB used"
    alone = summarize([], {"this computer": 999.0}, 2e9, None, now=1000.0)
    assert (alone.online, alone.total) == (1, 1)  # with nothing paired, this computer is the cluster
