"""The collectors a node agent runs by default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparksync_agent.collectors import Collector
from sparksync_agent.collectors.cpu import CpuCollector
from sparksync_agent.collectors.gpu import make_gpu_collector
from sparksync_agent.collectors.memory import MemoryCollector
from sparksync_agent.collectors.network import LinkWatch, NetworkCollector
from sparksync_agent.collectors.rdma import RdmaCollector


def default_collectors(
    proc_root: Path = Path("/proc"), sys_root: Path = Path("/sys"), nvml: Any = None, workloads: Any = None
) -> list[Collector]:
    """Memory, CPU, network and RDMA, plus GPU where NVML works (``nvml`` None: import pynvml)."""
    collectors: list[Collector] = [
        MemoryCollector(proc_root),
        CpuCollector(proc_root),
        # The kernel's link news describes this node's own /sys, not a test's fake tree.
        NetworkCollector(proc_root, sys_root, link_watch=LinkWatch() if sys_root == Path("/sys") else None),
        RdmaCollector(sys_root),
    ]
    gpu = make_gpu_collector(nvml)
    if gpu is not None:
        collectors.append(gpu)
    if workloads is not None:  # a supervisor.figures.FiguresBoard: tokens/s of running ranks
        from sparksync_agent.collectors.workloads import WorkloadsCollector

        collectors.append(WorkloadsCollector(workloads))
    return collectors
