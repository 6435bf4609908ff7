"""A fake NVML module for the GPU collector tests."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pynvml

NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED


class FakeNvml:
    """A GB10 as NVML shows it: memory and power limit NOT_SUPPORTED, the rest working.

    Errors are the real pynvml exception classes, as the collector meets them.
    """

    NVMLError = pynvml.NVMLError
    NVML_ERROR_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM

    def __init__(self, count: int = 1, init_error: Exception | None = None):
        self.count = count
        self.init_error = init_error
        self.failures: dict[str, Exception] = {}
        self.shutdowns = 0
        self.process_calls = 0
        self.processes = [SimpleNamespace(pid=os.getpid(), usedGpuMemory=None)]

    def _maybe_fail(self, what: str) -> None:
        if what in self.failures:
            raise self.failures[what]

    def nvmlInit(self):
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("handle", index)

    def nvmlDeviceGetName(self, handle):
        return "NVIDIA GB10"

    def nvmlDeviceGetUUID(self, handle):
        return f"GPU-0000-{handle[1]}"

    def nvmlDeviceGetUtilizationRates(self, handle):
        self._maybe_fail("utilization")
        return SimpleNamespace(gpu=87, memory=0)

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        self._maybe_fail("temperature")
        return 61

    def nvmlDeviceGetPowerUsage(self, handle):
        return 31_250  # mW

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        raise pynvml.NVMLError_NotSupported()

    def nvmlDeviceGetClockInfo(self, handle, clock):
        assert clock == pynvml.NVML_CLOCK_SM
        return 2418

    def nvmlDeviceGetMemoryInfo(self, handle):
        raise pynvml.NVMLError(NOT_SUPPORTED)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        self.process_calls += 1
        return self.processes
