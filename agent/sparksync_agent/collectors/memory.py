"""Memory from /proc/meminfo.

On GB10 the CPU and GPU share one pool of LPDDR5x and NVML cannot report
it, so this is the node's memory truth: used = MemTotal - MemAvailable.
(psutil's ``used`` subtracts free, buffers and cache instead, which hides
reclaimable memory differently and disagrees with what a workload can get.)
"""

from __future__ import annotations

from pathlib import Path

from sparksync_agent.collectors import Collector
from sparksync_agent.collectors.sysfs import KernelFile
from sparksync_agent.protocol import MemorySample

_KEYS = (b"MemTotal", b"MemFree", b"MemAvailable", b"Buffers", b"Cached", b"SwapTotal", b"SwapFree")


def parse_meminfo(data: bytes) -> dict[bytes, int]:
    """The fields SparkSync uses, in bytes (meminfo says kB, meaning KiB)."""
    values: dict[bytes, int] = {}
    for line in data.split(b"\n"):
        key, _, rest = line.partition(b":")
        if key in _KEYS:
            values[key] = int(rest.split()[0]) * 1024
    return values


def memory_sample(values: dict[bytes, int]) -> MemorySample:
    if b"MemTotal" not in values or b"MemAvailable" not in values:
        raise ValueError(
            "/proc/meminfo lacks MemTotal or MemAvailable (kernel older than 3.14?); "
            "memory telemetry needs a newer kernel"
        )
    total, available = values[b"MemTotal"], values[b"MemAvailable"]
    swap_total = values.get(b"SwapTotal", 0)
    return MemorySample(
        total_bytes=total,
        used_bytes=max(total - available, 0),
        available_bytes=available,
        free_bytes=values.get(b"MemFree", 0),
        cached_bytes=values.get(b"Cached", 0),
        buffers_bytes=values.get(b"Buffers", 0),
        swap_total_bytes=swap_total,
        swap_used_bytes=max(swap_total - values.get(b"SwapFree", swap_total), 0),
    )


class MemoryCollector(Collector):
    """``cached_bytes`` is meminfo's ``Cached`` alone (page cache, without SReclaimable)."""

    name = "memory"
    field = "memory"

    def __init__(self, proc_root: Path = Path("/proc")):
        self._meminfo = KernelFile(str(proc_root / "meminfo"))

    def sample(self, now: float) -> MemorySample:
        return memory_sample(parse_meminfo(self._meminfo.read()))

    def close(self) -> None:
        self._meminfo.close()
