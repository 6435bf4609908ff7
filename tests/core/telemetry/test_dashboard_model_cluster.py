"""What the cluster's figures count (this computer beside the Sparks), workloads' tokens/s, and gaps."""

from __future__ import annotations

import math

import numpy as np
from sparksync_agent.protocol import RankState, WorkloadFigures

from sparksync.core.telemetry.dashboard_model import DashboardModel
from sparksync.core.telemetry.dashboard_series import CLUSTER, MEMORY_TOTAL, MEMORY_USED, TOKENS_TOTAL, tokens_series
from tests.core.dashboard_samples import GB, memory_sample

T0 = 1_761_130_000.0
HERE = "this computer"


def figure(workload: str, tps: float | None, rank: int = 0) -> WorkloadFigures:
    return WorkloadFigures(workload_id=workload, name=f"g-1.{rank}.llama-server", group="g-1", rank=rank,
                           role="llama-server", state=RankState.ready, decode_tps=tps)  # fmt: skip


def test_this_computer_is_the_cluster_until_a_spark_is_paired_then_beside_it():
    model = DashboardModel()
    model.add_sample(HERE, memory_sample(1, T0, used_gb=8, total=16 * GB))
    assert (model.used_bytes(), model.capacity_bytes()) == (8 * GB, 16 * GB)  # alone: it is the cluster
    model.set_apart([HERE])  # a Spark was paired
    model.add_sample("spark-1", memory_sample(1, T0 + 1, used_gb=10))
    model.add_sample("spark-2", memory_sample(1, T0 + 1.5, used_gb=20))
    model.add_sample(HERE, memory_sample(2, T0 + 2, used_gb=9, total=16 * GB))
    assert (model.used_bytes(), model.capacity_bytes()) == (30 * GB, 256 * GB)  # the Sparks only
    assert model.latest(HERE, MEMORY_USED) == 9 * GB  # still plotted, beside them
    model.set_apart([])
    assert model.capacity_bytes() == 272 * GB


def test_a_workloads_tokens_per_second_comes_from_its_ranks_figures_in_the_samples():
    model = DashboardModel()
    model.add_sample("spark-1", memory_sample(1, T0, 10).model_copy(update={"workloads": [figure("w1", 30.0)]}))
    model.add_sample("spark-2", memory_sample(1, T0 + 0.5, 10).model_copy(
        update={"workloads": [figure("w1", 12.0, rank=1), figure("w2", 5.0)]}))  # fmt: skip
    assert model.latest(CLUSTER, tokens_series("w1")) == 42.0 and model.latest(CLUSTER, tokens_series("w2")) == 5.0
    assert model.latest(CLUSTER, TOKENS_TOTAL) == 47.0
    # w2 ended on spark-2: it leaves the sum with that node's next sample.
    model.add_sample("spark-2", memory_sample(2, T0 + 1, 10).model_copy(update={"workloads": [figure("w1", 12.0, 1)]}))
    assert model.latest(CLUSTER, TOKENS_TOTAL) == 42.0


def test_this_computers_model_is_drawn_but_not_summed_once_it_is_beside_the_cluster():
    model = DashboardModel()
    model.set_apart([HERE])
    model.add_sample(HERE, memory_sample(1, T0, 4).model_copy(update={"workloads": [figure("demo", 900.0)]}))
    model.add_sample("spark-1", memory_sample(1, T0 + 0.2, 10).model_copy(update={"workloads": [figure("big", 11.0)]}))
    assert model.latest(CLUSTER, tokens_series("demo")) == 900.0  # its curve is there
    assert model.latest(CLUSTER, TOKENS_TOTAL) == 11.0  # the cluster's total is the Sparks'
    assert model.latest(CLUSTER, MEMORY_TOTAL) == 128 * GB


def test_a_gap_is_kept_for_the_timeline_and_breaks_the_nodes_lines():
    model = DashboardModel()
    for i in range(3):
        model.add_sample(HERE, memory_sample(i + 1, T0 + i, used_gb=8))
    gap = model.mark_gap(HERE, T0 + 2, T0 + 9, "the agent restarted")
    model.add_sample(HERE, memory_sample(1, T0 + 9, used_gb=8))
    assert model.gaps == [gap] and model.gaps_marked == 1
    x, y = model.window(HERE, MEMORY_USED, T0 - 1)
    assert list(x[:3]) == [T0, T0 + 1, T0 + 2] and x[-1] == T0 + 9
    assert T0 + 2 < x[3] < T0 + 9 and math.isnan(y[3])  # nothing between the two runs: the line breaks
    assert np.isfinite(y[[0, 1, 2, 4]]).all()
