"""CPU use from /proc/stat and load from /proc/loadavg.

/proc/stat is parsed here rather than through psutil so that tests can point
the collector at a fake tree and so one sample costs a single file read.

Percentages cover the time since the previous sample. The first sample has
no previous one and reports the average since boot (the counters measured
against zero), which is a real figure rather than a placeholder 0.0.
"""

from __future__ import annotations

from pathlib import Path

from sparksync_agent.collectors import Collector
from sparksync_agent.collectors.sysfs import KernelFile
from sparksync_agent.protocol import CpuSample

# user nice system idle iowait irq softirq steal; guest time is already inside user/nice.
_COUNTED_FIELDS = 8
# The kernel recomputes load averages only every 5 s, so re-reading /proc/loadavg
# at every 10 Hz sample mostly returns the same numbers; once a second is plenty.
LOADAVG_REFRESH_S = 1.0


def parse_cpu_times(data: bytes) -> dict[bytes, tuple[int, int]]:
    """Per line name (b'cpu', b'cpu0', ...) -> (total ticks, idle ticks incl. iowait).

    Offline cores have no line, so they are simply absent.
    """
    times: dict[bytes, tuple[int, int]] = {}
    cut = data.find(b"\nintr ")  # no need to copy out the long interrupt lines below
    for line in (data[:cut] if cut >= 0 else data).split(b"\n"):
        if not line.startswith(b"cpu"):
            break  # the cpu lines come first
        fields = line.split(None, _COUNTED_FIELDS + 1)
        ticks = list(map(int, fields[1 : _COUNTED_FIELDS + 1]))
        times[fields[0]] = (sum(ticks), ticks[3] + ticks[4])
    return times


def busy_percent(old: tuple[int, int], new: tuple[int, int]) -> float:
    total, idle = new[0] - old[0], new[1] - old[1]
    if total <= 0:
        return 0.0
    return min(max(100.0 * (total - idle) / total, 0.0), 100.0)


def parse_loadavg(data: bytes) -> tuple[float, float, float]:
    one, five, fifteen = data.split()[:3]
    return float(one), float(five), float(fifteen)


class CpuCollector(Collector):
    name = "cpu"
    field = "cpu"

    def __init__(self, proc_root: Path = Path("/proc")):
        self._stat = KernelFile(str(proc_root / "stat"))
        self._loadavg = KernelFile(str(proc_root / "loadavg"))
        self._previous: dict[bytes, tuple[int, int]] = {}
        self._load_json = b"[0.0,0.0,0.0]"
        self._load_at: float | None = None

    def sample(self, now: float) -> CpuSample:
        return CpuSample.model_validate_json(self.encode(now))

    def encode(self, now: float) -> bytes:
        """CpuSample's JSON, written by hand on the sampling path (sample() checks it)."""
        times = parse_cpu_times(self._stat.read())
        if b"cpu" not in times:
            raise ValueError(f"{self._stat.path} has no 'cpu' line; CPU telemetry cannot run here")
        previous, self._previous = self._previous, times
        total = busy_percent(previous.get(b"cpu", (0, 0)), times[b"cpu"])
        per_core = [
            b"%r" % busy_percent(previous.get(name, (0, 0)), t) for name, t in times.items() if name != b"cpu"
        ]
        return b'{"percent":%r,"per_core":[%s],"load_avg":%s}' % (
            total,
            b",".join(per_core),
            self._load_avg(now),
        )

    def _load_avg(self, now: float) -> bytes:
        if self._load_at is None or now - self._load_at >= LOADAVG_REFRESH_S:
            self._load_json, self._load_at = b"[%r,%r,%r]" % parse_loadavg(self._loadavg.read()), now
        return self._load_json

    def close(self) -> None:
        self._stat.close()
        self._loadavg.close()
