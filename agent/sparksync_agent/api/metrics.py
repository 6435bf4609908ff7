"""Prometheus exposition of the latest sample, under stable ``sparksync_*`` names.

A custom collector reads the newest sample at scrape time, so the sampling
hot path never touches prometheus objects; unsupported GPU readings are left
out rather than exported as 0.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from sparksync_agent.api.workload_metrics import workload_metrics
from sparksync_agent.protocol import GpuSample, Reading, ReadingStatus, Sample
from sparksync_agent.runtime import AgentRuntime

router = APIRouter()


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.metrics_registry), media_type=CONTENT_TYPE_LATEST)


def make_registry(runtime: AgentRuntime) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SampleCollector(runtime))
    return registry


def _gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"sparksync_{name}", doc, labels=labels)


class SampleCollector:
    def __init__(self, runtime: AgentRuntime):
        self.runtime = runtime

    def collect(self) -> Iterator[Metric]:
        yield from self._agent()
        sample = self.runtime.sampler.latest
        if sample is None:
            return
        yield from _memory(sample)
        yield from _cpu(sample)
        yield from _net(sample)
        yield from _rdma(sample)
        yield from _gpu(sample)
        yield from workload_metrics(sample)

    def _agent(self) -> Iterator[Metric]:
        info = _gauge("agent_info", "Agent identity", ["version", "protocol", "node_id", "hostname"])
        rt = self.runtime
        info.add_metric([rt.info.agent_version, rt.info.protocol_version, rt.node_id, rt.info.hostname], 1)
        seq = _gauge("agent_last_sample_seq", "Sequence number of the newest sample")
        seq.add_metric([], rt.sampler.ring.last_seq)
        enabled = _gauge("agent_collector_enabled", "1 if the collector is running", ["collector"])
        for state in rt.collectors.states():
            enabled.add_metric([state.name], 1 if state.enabled else 0)
        yield from (info, seq, enabled)


def _memory(sample: Sample) -> Iterator[Metric]:
    mem = sample.memory
    if mem is None:
        return
    for field in ("total", "used", "available", "free", "cached", "buffers"):
        gauge = _gauge(f"memory_{field}_bytes", f"Unified memory {field} (/proc/meminfo)")
        gauge.add_metric([], getattr(mem, f"{field}_bytes"))
        yield gauge
    for field in ("total", "used"):
        gauge = _gauge(f"swap_{field}_bytes", f"Swap {field}")
        gauge.add_metric([], getattr(mem, f"swap_{field}_bytes"))
        yield gauge


def _cpu(sample: Sample) -> Iterator[Metric]:
    cpu = sample.cpu
    if cpu is None:
        return
    total = _gauge("cpu_percent", "CPU use, all cores")
    total.add_metric([], cpu.percent)
    cores = _gauge("cpu_core_percent", "CPU use per core", ["core"])
    for index, value in enumerate(cpu.per_core):
        cores.add_metric([str(index)], value)
    load = _gauge("load_average", "Load average", ["period"])
    for period, value in zip(("1m", "5m", "15m"), cpu.load_avg):
        load.add_metric([period], value)
    yield from (total, cores, load)


_NET_RATES = [
    ("net_receive_bytes_per_second", "rx_bytes_per_s", "Bytes received per second"),
    ("net_transmit_bytes_per_second", "tx_bytes_per_s", "Bytes sent per second"),
    ("net_receive_packets_per_second", "rx_packets_per_s", "Packets received per second"),
    ("net_transmit_packets_per_second", "tx_packets_per_s", "Packets sent per second"),
    ("net_receive_errors", "rx_errors", "Receive errors since boot"),
    ("net_transmit_errors", "tx_errors", "Transmit errors since boot"),
    ("net_receive_drops", "rx_drops", "Receive drops since boot"),
    ("net_transmit_drops", "tx_drops", "Transmit drops since boot"),
]


def _net(sample: Sample) -> Iterator[Metric]:
    for name, attr, doc in _NET_RATES:
        gauge = _gauge(name, doc, ["interface", "kind"])
        for nic in sample.net or []:
            gauge.add_metric([nic.name, nic.kind.value], getattr(nic, attr))
        yield gauge
    speed = _gauge("net_link_speed_bits_per_second", "Negotiated link speed", ["interface"])
    mtu = _gauge("net_mtu_bytes", "Interface MTU", ["interface"])
    for nic in sample.net or []:
        if nic.speed_mbps is not None:
            speed.add_metric([nic.name], nic.speed_mbps * 1_000_000)
        if nic.mtu is not None:
            mtu.add_metric([nic.name], nic.mtu)
    yield from (speed, mtu)


def _rdma(sample: Sample) -> Iterator[Metric]:
    if sample.rdma is None:
        return
    fields = [
        ("rdma_receive_bytes_per_second", "rx_bytes_per_s", "RDMA bytes received per second"),
        ("rdma_transmit_bytes_per_second", "tx_bytes_per_s", "RDMA bytes sent per second"),
        ("rdma_receive_bytes", "rx_bytes_total", "RDMA bytes received (counter, bytes)"),
        ("rdma_transmit_bytes", "tx_bytes_total", "RDMA bytes sent (counter, bytes)"),
    ]
    for name, attr, doc in fields:
        gauge = _gauge(name, doc, ["device", "port"])
        for port in sample.rdma:
            gauge.add_metric([port.device, str(port.port)], getattr(port, attr))
        yield gauge


_GPU_READINGS = [
    ("gpu_utilization_percent", "utilization_pct", 1.0, "GPU utilisation"),
    ("gpu_temperature_celsius", "temperature_c", 1.0, "GPU temperature"),
    ("gpu_power_watts", "power_w", 1.0, "GPU power draw"),
    ("gpu_power_limit_watts", "power_limit_w", 1.0, "GPU power limit"),
    ("gpu_sm_clock_hertz", "sm_clock_mhz", 1e6, "GPU SM clock"),
    ("gpu_memory_used_bytes", "memory_used_bytes", 1.0, "GPU memory used (where NVML reports it)"),
    ("gpu_memory_total_bytes", "memory_total_bytes", 1.0, "GPU memory total (where NVML reports it)"),
]


def _gpu(sample: Sample) -> Iterator[Metric]:
    if sample.gpu is None:
        return
    for name, attr, scale, doc in _GPU_READINGS:
        gauge = _gauge(name, doc, ["gpu", "name"])
        for gpu in sample.gpu:
            _add_reading(gauge, gpu, getattr(gpu, attr), scale)
        yield gauge


def _add_reading(gauge: GaugeMetricFamily, gpu: GpuSample, reading: Reading, scale: float) -> None:
    if reading.status is ReadingStatus.ok and reading.value is not None:
        gauge.add_metric([str(gpu.index), gpu.name], reading.value * scale)
