"""GPU telemetry through NVML (the ``pynvml`` module of nvidia-ml-py).

Every figure is a :class:`Reading`: on GB10 NVML answers NOT_SUPPORTED for
memory and the power limit, and that must reach the user as "unsupported",
never as 0. Any other NVML failure on one figure makes that figure
"error" and leaves the rest of the sample intact.

Static facts (name, UUID, handles) are read once. The per-process list costs
more than the other calls and changes slowly, so it is refreshed at most
every ``process_refresh_s`` seconds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparksync_agent.collectors import Collector
from sparksync_agent.protocol import GpuProcess, GpuSample, Reading, ReadingStatus

log = logging.getLogger(__name__)

_NOT_AVAILABLE = 2**64 - 1  # NVML's "value not available" for unsigned 64-bit figures


def _text(value: Any) -> str:
    # Older nvidia-ml-py releases return bytes for names and UUIDs.
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def process_name(pid: int) -> str | None:
    try:
        import psutil

        return psutil.Process(pid).name()
    except Exception:  # noqa: BLE001 - the process may be gone or in another pid namespace
        return None


@dataclass
class _Device:
    index: int
    handle: Any
    name: str
    uuid: str | None
    processes: list[GpuProcess] = field(default_factory=list)
    processes_at: float | None = None


class GpuCollector(Collector):
    """Reads every GPU NVML sees. ``nvml`` must already be initialised; close() shuts it down."""

    name = "gpu"
    field = "gpu"

    def __init__(
        self,
        nvml: Any,
        process_refresh_s: float = 1.0,
        name_of_process: Callable[[int], str | None] = process_name,
    ):
        self._nvml = nvml
        self._process_refresh_s = process_refresh_s
        self._name_of_process = name_of_process
        self._warned: set[tuple[int, str]] = set()
        self._closed = False
        self.devices = [self._open_device(i) for i in range(nvml.nvmlDeviceGetCount())]

    def _open_device(self, index: int) -> _Device:
        handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
        name = self._call(index, "name", self._nvml.nvmlDeviceGetName, handle)
        uuid = self._call(index, "uuid", self._nvml.nvmlDeviceGetUUID, handle)
        return _Device(
            index=index,
            handle=handle,
            name=_text(name) if isinstance(name, (str, bytes)) else f"GPU {index}",
            uuid=_text(uuid) if isinstance(uuid, (str, bytes)) else None,
        )

    def sample(self, now: float) -> list[GpuSample]:
        return [self._device_sample(device, now) for device in self.devices]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._nvml.nvmlShutdown()

    def _device_sample(self, device: _Device, now: float) -> GpuSample:
        nvml, h, i = self._nvml, device.handle, device.index
        memory = self._call(i, "memory", nvml.nvmlDeviceGetMemoryInfo, h)
        utilization = self._call(i, "utilization", nvml.nvmlDeviceGetUtilizationRates, h)
        return GpuSample(
            index=i,
            name=device.name,
            uuid=device.uuid,
            utilization_pct=self._reading(utilization, lambda u: u.gpu),
            temperature_c=self._reading(
                self._call(i, "temperature", nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU)
            ),
            power_w=self._reading(self._call(i, "power", nvml.nvmlDeviceGetPowerUsage, h), _milli),
            power_limit_w=self._reading(
                self._call(i, "power_limit", nvml.nvmlDeviceGetEnforcedPowerLimit, h), _milli
            ),
            sm_clock_mhz=self._reading(
                self._call(i, "sm_clock", nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM)
            ),
            memory_used_bytes=self._reading(memory, lambda m: m.used),
            memory_total_bytes=self._reading(memory, lambda m: m.total),
            processes=self._processes(device, now),
        )

    def _call(self, index: int, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args), or the Reading that stands for its failure."""
        try:
            return fn(*args)
        except self._nvml.NVMLError as exc:
            if getattr(exc, "value", None) == self._nvml.NVML_ERROR_NOT_SUPPORTED:
                return Reading(status=ReadingStatus.unsupported)
            self._warn_once(index, what, exc)
        except Exception as exc:  # noqa: BLE001 - one bad figure must not cost the whole sample
            self._warn_once(index, what, exc)
        return Reading(status=ReadingStatus.error)

    @staticmethod
    def _reading(result: Any, pick: Callable[[Any], Any] = lambda v: v) -> Reading:
        if isinstance(result, Reading):
            return result
        value = pick(result)
        if value is None:
            return Reading(status=ReadingStatus.unsupported)
        return Reading(value=float(value))

    def _processes(self, device: _Device, now: float) -> list[GpuProcess]:
        fresh = device.processes_at is not None and now - device.processes_at < self._process_refresh_s
        if not fresh:
            device.processes_at = now
            found = self._call(
                device.index, "processes", self._nvml.nvmlDeviceGetComputeRunningProcesses, device.handle
            )
            device.processes = [] if isinstance(found, Reading) else [self._process(p) for p in found]
        return device.processes

    def _process(self, info: Any) -> GpuProcess:
        used = getattr(info, "usedGpuMemory", None)
        return GpuProcess(
            pid=info.pid,
            name=self._name_of_process(info.pid),
            used_memory_bytes=None if used is None or used == _NOT_AVAILABLE else int(used),
        )

    def _warn_once(self, index: int, what: str, exc: Exception) -> None:
        if (index, what) not in self._warned:
            self._warned.add((index, what))
            log.warning("GPU %d: reading %s failed (%s); it is reported as 'error'", index, what, exc)


def _milli(value: Any) -> float:
    return value / 1000.0


def make_gpu_collector(nvml: Any = None) -> GpuCollector | None:
    """A GpuCollector, or None (with one info line saying why) where NVML is missing or sees no GPU."""
    if nvml is None:
        try:
            import pynvml
        except ImportError as exc:
            log.info("no NVML: nvidia-ml-py is not installed (%s); GPU telemetry off", exc)
            return None
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - any failure here means "no NVML on this node"
        log.info("no NVML: %s; GPU telemetry off", exc)
        return None
    return _collector_or_none(nvml)


def _collector_or_none(nvml: Any) -> GpuCollector | None:
    try:
        collector = GpuCollector(nvml)
    except Exception as exc:  # noqa: BLE001
        _shutdown_quietly(nvml)
        log.info("no NVML: listing GPUs failed (%s); GPU telemetry off", exc)
        return None
    if not collector.devices:
        collector.close()
        log.info("no NVML GPU: NVML sees no device; GPU telemetry off")
        return None
    return collector


def _shutdown_quietly(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:
        log.debug("nvmlShutdown failed", exc_info=True)
