"""What a node is and what it measures: node info, telemetry samples, the agent's status."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import Field

from sparksync_agent.protocol.base import AGENT_VERSION, PROTOCOL_VERSION, WireModel
from sparksync_agent.protocol.workloads import EngineReport, WorkloadFigures

# --- node info -------------------------------------------------------------


class NodeInfo(WireModel):
    node_id: str
    hostname: str
    model: str | None = None
    arch: str
    os: str
    kernel: str
    cpu_count: int
    agent_version: str = AGENT_VERSION
    protocol_version: str = PROTOCOL_VERSION
    boot_time: float = Field(description="Unix time the machine booted.")
    ssh_host_key_fingerprints: dict[str, str] = Field(
        default_factory=dict, description="Key type -> 'SHA256:...' as ssh-keygen -l prints it."
    )


# --- telemetry ---------------------------------------------------------------


class MemorySample(WireModel):
    """Unified memory, from /proc/meminfo: used = MemTotal - MemAvailable."""

    total_bytes: int
    used_bytes: int
    available_bytes: int
    free_bytes: int
    cached_bytes: int
    buffers_bytes: int
    swap_total_bytes: int
    swap_used_bytes: int


class CpuSample(WireModel):
    percent: float
    per_core: list[float]
    load_avg: tuple[float, float, float]


class InterfaceKind(str, Enum):
    management = "management"
    fabric = "fabric"
    loopback = "loopback"
    virtual = "virtual"
    other = "other"


class NetInterfaceSample(WireModel):
    name: str
    kind: InterfaceKind
    is_up: bool
    speed_mbps: int | None = Field(None, description="Negotiated link speed; None where the driver does not say.")
    mtu: int | None = None
    addresses: list[str] = Field(default_factory=list)
    networks: list[str] = Field(
        default_factory=list,
        description="The same addresses with their prefix length ('10.0.0.2/30'): which links share a subnet.",
    )
    rx_bytes_per_s: float
    tx_bytes_per_s: float
    rx_packets_per_s: float
    tx_packets_per_s: float
    rx_errors: int = Field(description="Cumulative since boot.")
    tx_errors: int
    rx_drops: int
    tx_drops: int


class RdmaPortSample(WireModel):
    """One RDMA port. RoCE traffic bypasses the IP counters, so it is counted here."""

    device: str
    port: int
    state: str | None = None
    rate: str | None = Field(None, description="As sysfs says it, e.g. '200 Gb/sec (4X HDR)'.")
    rx_bytes_per_s: float
    tx_bytes_per_s: float
    rx_bytes_total: int
    tx_bytes_total: int


class ReadingStatus(str, Enum):
    ok = "ok"
    unsupported = "unsupported"  # NVML answered NOT_SUPPORTED (e.g. GB10 memory)
    error = "error"


class Reading(WireModel):
    """A GPU figure that NVML may not give. Never report an unsupported one as 0."""

    value: float | None = None
    status: ReadingStatus = ReadingStatus.ok


class GpuProcess(WireModel):
    pid: int
    name: str | None = None
    used_memory_bytes: int | None = None


class GpuSample(WireModel):
    index: int
    name: str
    uuid: str | None = None
    utilization_pct: Reading
    temperature_c: Reading
    power_w: Reading
    power_limit_w: Reading
    sm_clock_mhz: Reading
    memory_used_bytes: Reading
    memory_total_bytes: Reading
    processes: list[GpuProcess] = Field(default_factory=list)



class Sample(WireModel):
    """One telemetry sample. ``seq`` grows by one per sample within a ``run_id``."""

    seq: int = Field(ge=1)
    ts: float = Field(description="Unix time the sample was taken.")
    memory: MemorySample | None = None
    cpu: CpuSample | None = None
    net: list[NetInterfaceSample] | None = None
    rdma: list[RdmaPortSample] | None = Field(None, description="Absent where the node has no RDMA.")
    gpu: list[GpuSample] | None = Field(None, description="Absent where NVML is missing.")
    workloads: list[WorkloadFigures] | None = Field(None, description="Absent while no workload runs.")


class Snapshot(WireModel):
    info: NodeInfo
    run_id: str
    sample_hz: float
    latest: Sample | None = None
    engines: EngineReport | None = Field(None, description="The last engine detection, once one ran.")


class TelemetryPage(WireModel):
    """Samples with seq > ``since``, oldest first."""

    run_id: str
    since: int
    samples: list[Sample]
    last_seq: int = Field(description="Newest seq the agent holds (0 before the first sample).")
    lost: int = Field(0, description="Samples after 'since' that the ring buffer no longer holds.")


class CollectorState(WireModel):
    name: str
    enabled: bool
    reason: str | None = Field(None, description="Why it is disabled.")


class AgentStatus(WireModel):
    agent_version: str
    protocol_version: str
    node_id: str
    run_id: str
    pid: int
    started_at: float
    uptime_s: float
    sample_hz: float
    last_seq: int
    ring_capacity: int
    collectors: list[CollectorState]
    advertising: bool
    stream_clients: int


# Literal kept for callers that type the stream's event names.
StreamEvent = Literal["sample", "lost"]
