from __future__ import annotations

import time

import pytest

from sparksync_agent.collectors import CollectorSet
from sparksync_agent.collectors.cpu import CpuCollector
from sparksync_agent.collectors.defaults import default_collectors
from sparksync_agent.collectors.gpu import GpuCollector
from sparksync_agent.collectors.memory import MemoryCollector
from sparksync_agent.collectors.network import NetworkCollector
from sparksync_agent.protocol import InterfaceKind, Sample
from tests.agent.collectors.fakenvml import FakeNvml


class NoNvml:
    """An NVML whose library is missing."""

    def nvmlInit(self):
        import pynvml

        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)


@pytest.fixture
def fake_node(tree):
    tree.meminfo(MemTotal=1000, MemFree=400, MemAvailable=600)
    tree.stat({"cpu": [10, 0, 0, 10, 0, 0, 0, 0, 0, 0], "cpu0": [10, 0, 0, 10, 0, 0, 0, 0, 0, 0]})
    tree.loadavg(0.1, 0.2, 0.3)
    tree.net_dev({"lo": {"rx_bytes": 1}})
    return tree


def test_a_failing_collector_is_disabled_and_the_others_go_on(fake_node):
    collectors = CollectorSet(
        [
            MemoryCollector(fake_node.proc),
            CpuCollector(fake_node.proc),
            NetworkCollector(fake_node.proc, fake_node.sys),
        ]
    )
    assert set(collectors.collect(0.0)) == {"memory", "cpu", "net"}
    (fake_node.proc / "meminfo").write_text("not meminfo at all\n")  # a kernel file gone wrong
    for now in (1.0, 2.0):
        values = collectors.collect(now)
        assert set(values) == {"cpu", "net"}
        Sample(seq=1, ts=time.time(), **values)
    states = {s.name: s for s in collectors.states()}
    assert not states["memory"].enabled and states["memory"].reason
    assert states["cpu"].enabled and states["network"].enabled
    collectors.close()


def test_defaults_on_a_fake_tree_without_rdma_or_gpu(fake_node):
    collectors = default_collectors(fake_node.proc, fake_node.sys, nvml=NoNvml())
    assert [c.name for c in collectors] == ["memory", "cpu", "network", "rdma"]
    values = CollectorSet(collectors).collect(0.0)
    assert values["rdma"] is None
    assert values["memory"].used_bytes == 400 * 1024


def test_defaults_include_the_gpu_where_nvml_works(fake_node):
    collectors = default_collectors(fake_node.proc, fake_node.sys, nvml=FakeNvml())
    assert isinstance(collectors[-1], GpuCollector)
    CollectorSet(collectors).close()


def test_smoke_on_this_machine():
    collectors = CollectorSet(default_collectors())
    try:
        collectors.collect(time.monotonic())
        time.sleep(0.05)
        values = collectors.collect(time.monotonic())
    finally:
        collectors.close()
    assert all(state.enabled for state in collectors.states()), collectors.states()
    sample = Sample(seq=1, ts=time.time(), **values)
    assert sample.memory.total_bytes > 0 and 0 < sample.memory.used_bytes < sample.memory.total_bytes
    assert len(sample.cpu.per_core) >= 1
    lo = next(n for n in sample.net if n.name == "lo")
    assert lo.kind == InterfaceKind.loopback and "127.0.0.1" in lo.addresses
