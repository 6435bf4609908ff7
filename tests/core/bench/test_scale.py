"""The scale sweep: one profile at every size the cluster allows, one report, teardown each time."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from sparksync.core.bench.context import RunContext
from sparksync.core.bench.endpoint import Endpoint
from sparksync.core.bench.errors import BenchInputError, EndpointUnreachableError
from sparksync.core.bench.history import HistoryStore
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.scale import ScaleSweep, SweepTarget, plan_sizes

PROFILE = BenchProfile.build(pp=(64,), tg=(24,), runs=2)


def test_sizes_are_what_the_cluster_allows():
    assert plan_sizes((1, 2, 4, 8), 4) == [1, 2, 4]
    assert plan_sizes((8, 2, 2, 1), 8) == [1, 2, 8]
    with pytest.raises(BenchInputError, match="1 to 8 nodes, not 9"):
        plan_sizes((1,), 9)
    with pytest.raises(BenchInputError, match="none of the sizes"):
        plan_sizes((8,), 4)


@pytest.mark.slow
def test_a_sweep_over_one_two_and_four_nodes_reports_three_sizes(make_fake, tokenizer_json, tmp_path):
    brought_up, taken_down, progress = [], [], []

    @contextmanager
    def bring_up(nodes: int):
        # More nodes, faster tokens: the fake stands in for a model split over more Sparks.
        server = make_fake(token_delay_s=0.006 / nodes)
        brought_up.append(nodes)
        try:
            yield SweepTarget(Endpoint.parse(server.base_url), "tiny-fake", tokenizer_json,
                              RunContext(cluster_size=nodes, topology="switch", collective_backend="nccl"))
        finally:
            taken_down.append(nodes)

    history = HistoryStore(tmp_path / "h.sqlite3")
    sweep = ScaleSweep(bring_up, history, available_nodes=4, profile=PROFILE,
                       on_progress=lambda n, p: progress.append(n))
    result = sweep.run()

    assert brought_up == taken_down == [1, 2, 4]
    assert [r.status for r in result.records] == ["complete"] * 3
    assert {item.id for item in history.list_runs(sweep_id=result.sweep_id)} == {r.id for r in result.records}
    report = result.report
    assert [row.cluster_size for row in report.rows] == [1, 2, 4]
    assert report.rows[2].speedup > 1.5, [row.throughput for row in report.rows]
    assert set(progress) == {1, 2, 4}


@pytest.mark.slow
def test_a_size_that_cannot_be_brought_up_is_skipped(make_fake, tokenizer_json, tmp_path):
    @contextmanager
    def bring_up(nodes: int):
        if nodes == 2:
            raise EndpointUnreachableError("node spark-2 does not answer")
        server = make_fake()
        yield SweepTarget(Endpoint.parse(server.base_url), "tiny-fake", tokenizer_json,
                          RunContext(cluster_size=nodes))

    history = HistoryStore(tmp_path / "h.sqlite3")
    result = ScaleSweep(bring_up, history, available_nodes=2, profile=PROFILE).run()
    assert result.skipped == {2: "node spark-2 does not answer"}
    assert [row.cluster_size for row in result.report.rows] == [1]


def test_a_cancelled_sweep_starts_no_further_size(tokenizer_json, tmp_path):
    sizes = []

    @contextmanager
    def bring_up(nodes: int):
        sizes.append(nodes)
        sweep.cancel()
        raise EndpointUnreachableError("stopped for the test")
        yield  # pragma: no cover

    sweep = ScaleSweep(bring_up, HistoryStore(tmp_path / "h.sqlite3"), available_nodes=8, profile=PROFILE)
    result = sweep.run()
    assert sizes == [1] and result.cancelled and result.report is None
