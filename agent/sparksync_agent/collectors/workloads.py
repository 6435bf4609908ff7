"""Tokens/s of running workload ranks, as ``Sample.workloads``.

The supervisor scrapes the engines off the sampling path (once a second, in
its own task) and leaves the figures on a board; this collector only reads
that attribute, so a sample costs nothing more while no workload runs.
"""

from __future__ import annotations

from typing import Any

from sparksync_agent.collectors import Collector


class WorkloadsCollector(Collector):
    name = "workloads"
    field = "workloads"

    def __init__(self, board: Any):
        self.board = board  # a supervisor.figures.FiguresBoard

    def sample(self, now: float) -> Any:
        return self.board.figures

    def encode(self, now: float) -> bytes | None:
        # The board encodes once per update (1 Hz), however often the sampler asks.
        return self.board.encoded()
