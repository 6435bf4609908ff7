"""The workloads collector: nothing while idle, and figures encoded once per update, not once per sample."""

from __future__ import annotations

import json

from sparksync_agent.collectors.workloads import WorkloadsCollector
from sparksync_agent.protocol import RankState, Sample, WorkloadFigures
from sparksync_agent.supervisor.figures import FiguresBoard


def figures(tps: float) -> list[WorkloadFigures]:
    return [
        WorkloadFigures(
            workload_id="w", name="g.0.llama-server", group="g", rank=0, role="llama-server",
            state=RankState.ready, decode_tps=tps,
        )
    ]  # fmt: skip


def test_the_collector_adds_nothing_while_no_rank_runs():
    collector = WorkloadsCollector(FiguresBoard())
    assert collector.sample(0.0) is None and collector.encode(0.0) is None


def test_figures_are_encoded_once_per_update_as_the_sample_field():
    board = FiguresBoard()
    collector = WorkloadsCollector(board)
    board.figures = figures(120.5)
    first = collector.encode(0.0)
    assert collector.encode(0.1) is first  # the sampler may ask at 10 Hz; the board changes at 1 Hz
    sample = Sample.model_validate({"seq": 1, "ts": 0.0, "workloads": json.loads(first)})
    assert sample.workloads == figures(120.5)
    board.figures = figures(99.0)
    assert json.loads(collector.encode(0.2))[0]["decode_tps"] == 99.0
    board.figures = None
    assert collector.encode(0.3) is None
