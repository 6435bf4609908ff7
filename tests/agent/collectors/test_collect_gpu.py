from __future__ import annotations

import logging
import os
import sys
from types import SimpleNamespace

import psutil
import pynvml
import pytest

from sparksync_agent.collectors.gpu import GpuCollector, make_gpu_collector
from sparksync_agent.protocol import ReadingStatus
from tests.agent.collectors.fakenvml import FakeNvml


def test_gb10_quirks_read_as_unsupported_never_zero():
    gpu = GpuCollector(FakeNvml()).sample(0.0)[0]
    for reading in (gpu.memory_used_bytes, gpu.memory_total_bytes, gpu.power_limit_w):
        assert (reading.status, reading.value) == (ReadingStatus.unsupported, None)
    assert (gpu.index, gpu.name, gpu.uuid) == (0, "NVIDIA GB10", "GPU-0000-0")
    assert gpu.utilization_pct.value == 87.0 and gpu.utilization_pct.status == ReadingStatus.ok
    assert gpu.temperature_c.value == 61.0
    assert gpu.power_w.value == 31.25
    assert gpu.sm_clock_mhz.value == 2418.0


def test_processes_named_through_psutil():
    gpu = GpuCollector(FakeNvml()).sample(0.0)[0]
    assert [(p.pid, p.name, p.used_memory_bytes) for p in gpu.processes] == [
        (os.getpid(), psutil.Process().name(), None)
    ]


def test_process_memory_when_nvml_gives_it():
    nvml = FakeNvml()
    nvml.processes = [SimpleNamespace(pid=2**22 + 7, usedGpuMemory=3 * 2**30)]
    proc = GpuCollector(nvml, name_of_process=lambda pid: None).sample(0.0)[0].processes[0]
    assert (proc.name, proc.used_memory_bytes) == (None, 3 * 2**30)


def test_process_list_is_refreshed_at_most_every_interval():
    nvml = FakeNvml()
    collector = GpuCollector(nvml, process_refresh_s=1.0)
    for step in range(10):
        collector.sample(step / 10)
    assert nvml.process_calls == 1
    collector.sample(1.0)
    assert nvml.process_calls == 2


def test_other_nvml_errors_mark_just_that_figure(caplog):
    nvml = FakeNvml(count=2)
    nvml.failures["temperature"] = pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
    nvml.failures["utilization"] = RuntimeError("driver hiccup")
    collector = GpuCollector(nvml)
    with caplog.at_level(logging.WARNING, logger="sparksync_agent.collectors.gpu"):
        for now in (0.0, 0.1):
            gpus = collector.sample(now)
    for gpu in gpus:
        assert (gpu.temperature_c.status, gpu.temperature_c.value) == (ReadingStatus.error, None)
        assert gpu.utilization_pct.status == ReadingStatus.error
        assert gpu.power_w.value == 31.25
    assert len(caplog.records) == 4  # once per GPU and figure, not once per sample


def test_close_shuts_nvml_down_once():
    nvml = FakeNvml()
    collector = make_gpu_collector(nvml)
    assert isinstance(collector, GpuCollector)
    collector.close()
    collector.close()
    assert nvml.shutdowns == 1


def one_info_line(caplog) -> str:
    records = [r for r in caplog.records if r.name == "sparksync_agent.collectors.gpu"]
    assert [r.levelno for r in records] == [logging.INFO]
    return records[0].getMessage()


def test_nvml_init_failure_means_no_collector(caplog):
    nvml = FakeNvml(init_error=pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    with caplog.at_level(logging.DEBUG):
        assert make_gpu_collector(nvml) is None
    message = one_info_line(caplog)
    assert message.startswith("no NVML:") and "GPU telemetry off" in message


def test_missing_nvidia_ml_py_means_no_collector(caplog, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes "import pynvml" raise ImportError
    with caplog.at_level(logging.DEBUG):
        assert make_gpu_collector() is None
    assert "nvidia-ml-py is not installed" in one_info_line(caplog)


def test_no_device_means_no_collector_and_nvml_released(caplog):
    nvml = FakeNvml(count=0)
    with caplog.at_level(logging.DEBUG):
        assert make_gpu_collector(nvml) is None
    assert nvml.shutdowns == 1
    assert "no device" in one_info_line(caplog)


@pytest.mark.parametrize("raw", [b"NVIDIA GB10", "NVIDIA GB10"])
def test_names_as_bytes_or_text(raw):
    nvml = FakeNvml()
    nvml.nvmlDeviceGetName = lambda handle: raw
    assert GpuCollector(nvml).sample(0.0)[0].name == "NVIDIA GB10"
