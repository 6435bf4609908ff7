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
_LINE_STARTS = tuple((key, b"\n%s:" % key) for key in _KEYS)  # "Cached" must not match "SwapCached"

# MemorySample's fields, in order; written by hand because this runs at every sample
# (sample() checks the result against the model).
_JSON = (
    b'{"total_bytes":%d,"used_bytes":%d,"available_bytes":%d,"free_bytes":%d,'
    b'"cached_bytes":%d,"buffers_bytes":%d,"swap_total_bytes":%d,"swap_used_bytes":%d}'
)


def parse_meminfo(data: bytes) -> dict[bytes, int]:
    """The fields SparkSync uses, in KiB (meminfo says kB, meaning KiB).

    Each key is looked up rather than the file split into its ~150 tokens: on the
    sampling path every object allocated is memory touched with cold caches.
    """
    text = b"\n" + data  # so that the first line starts after a newline too
    values: dict[bytes, int] = {}
    for key, line_start in _LINE_STARTS:
        at = text.find(line_start)
        if at >= 0:
            at += len(line_start)
            end = text.find(b"\n", at)
            values[key] = int(text[at : end if end >= 0 else None].rstrip(b" kB"))
    if b"MemTotal" not in values or b"MemAvailable" not in values:
        raise ValueError(
            "/proc/meminfo lacks MemTotal or MemAvailable (kernel older than 3.14?); "
            "memory telemetry needs a newer kernel"
        )
    return values


class MemoryCollector(Collector):
    """``cached_bytes`` is meminfo's ``Cached`` alone (page cache, without SReclaimable)."""

    name = "memory"
    field = "memory"

    def __init__(self, proc_root: Path = Path("/proc")):
        self._meminfo = KernelFile(str(proc_root / "meminfo"))

    def sample(self, now: float) -> MemorySample:
        return MemorySample.model_validate_json(self.encode(now))

    def encode(self, now: float) -> bytes:
        kib = parse_meminfo(self._meminfo.read())
        total, available = kib[b"MemTotal"], kib[b"MemAvailable"]
        swap_total = kib.get(b"SwapTotal", 0)
        swap_free = kib.get(b"SwapFree", swap_total)
        return _JSON % (
            total * 1024,
            max(total - available, 0) * 1024,
            available * 1024,
            kib.get(b"MemFree", 0) * 1024,
            kib.get(b"Cached", 0) * 1024,
            kib.get(b"Buffers", 0) * 1024,
            swap_total * 1024,
            max(swap_total - swap_free, 0) * 1024,
        )

    def close(self) -> None:
        self._meminfo.close()
