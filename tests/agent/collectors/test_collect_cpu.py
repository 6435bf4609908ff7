from __future__ import annotations

import pytest

from sparksync_agent.collectors.cpu import CpuCollector


def ticks(busy: int, idle: int, iowait: int = 0) -> list[int]:
    # user nice system idle iowait irq softirq steal guest guest_nice
    return [busy, 0, 0, idle, iowait, 0, 0, 0, 0, 0]


def write_stat(tree, cores: list[tuple[int, int, int]]) -> None:
    cpus = {"cpu": ticks(sum(c[0] for c in cores), sum(c[1] for c in cores), sum(c[2] for c in cores))}
    cpus.update({f"cpu{i}": ticks(*c) for i, c in enumerate(cores)})
    tree.stat(cpus)


@pytest.fixture
def collector(tree):
    tree.loadavg(1.5, 0.75, 0.25)
    return CpuCollector(tree.proc)


def test_first_sample_is_the_average_since_boot(tree, collector):
    write_stat(tree, [(25, 75, 0), (50, 50, 0)])
    sample = collector.sample(0.0)
    assert sample.per_core == [25.0, 50.0]
    assert sample.percent == 37.5
    assert sample.load_avg == (1.5, 0.75, 0.25)


def test_per_core_percent_covers_time_since_previous_sample(tree, collector):
    write_stat(tree, [(100, 100, 0), (100, 100, 0)])
    collector.sample(0.0)
    # core 0: 90 busy of 100; core 1: 10 busy, 60 idle and 30 iowait (iowait counts as idle).
    write_stat(tree, [(190, 110, 0), (110, 160, 30)])
    sample = collector.sample(1.0)
    assert sample.per_core == [90.0, 10.0]
    assert sample.percent == 50.0


def test_no_elapsed_ticks_reads_zero(tree, collector):
    write_stat(tree, [(100, 100, 0)])
    collector.sample(0.0)
    assert collector.sample(0.1).per_core == [0.0]


def test_core_going_offline_drops_out(tree, collector):
    write_stat(tree, [(10, 10, 0), (10, 10, 0)])
    collector.sample(0.0)
    tree.stat({"cpu": ticks(30, 30), "cpu0": ticks(20, 20)})
    sample = collector.sample(1.0)
    assert sample.per_core == [50.0]


def test_stat_without_cpu_line_raises(tree, collector):
    tree.write(tree.proc / "stat", "intr 1 2 3\n")
    with pytest.raises(ValueError, match="no 'cpu' line"):
        collector.sample(0.0)


def test_load_average_is_reread_once_a_second(tree, collector):
    write_stat(tree, [(1, 1, 0)])
    collector.sample(0.0)
    tree.loadavg(3.0, 2.0, 1.0)
    assert collector.sample(0.5).load_avg == (1.5, 0.75, 0.25)  # the kernel updates it every 5 s anyway
    assert collector.sample(1.0).load_avg == (3.0, 2.0, 1.0)
