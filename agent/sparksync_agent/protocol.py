"""The wire protocol between the SparkSync client and a node agent.

Every message that crosses the wire is one of these pydantic models, and this
is the only module that defines them: the client imports it from the agent
package so both sides always agree on the shape.

Versioning: ``PROTOCOL_VERSION`` is ``MAJOR.MINOR``. A change that an older
peer cannot read bumps MAJOR; additive, optional fields bump MINOR. Client and
agent exchange versions first (``POST /v1/hello``) and refuse a different
MAJOR with an error naming both versions.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sparksync_agent._version import __version__ as AGENT_VERSION

PROTOCOL_VERSION = "1.1"  # 1.1: workloads, logs, engines; Sample.workloads; Snapshot.engines

__all__ = [
    "AGENT_VERSION",
    "PROTOCOL_VERSION",
    "AgentStatus",
    "CollectorState",
    "CpuSample",
    "EngineCheck",
    "EngineReport",
    "ErrorBody",
    "GpuProcess",
    "GpuSample",
    "Hello",
    "HelloReply",
    "InterfaceKind",
    "LogLine",
    "LogPage",
    "MemorySample",
    "NetInterfaceSample",
    "NodeInfo",
    "RankLaunch",
    "RankStart",
    "RankState",
    "RankStatus",
    "RdmaPortSample",
    "ReadinessProbe",
    "Reading",
    "ReadingStatus",
    "RestartPolicy",
    "Sample",
    "Snapshot",
    "TelemetryPage",
    "TokensSource",
    "WorkloadFigures",
    "WorkloadList",
    "WorkloadStatus",
    "protocol_major",
]


def protocol_major(version: str) -> int:
    """The MAJOR part of a ``MAJOR.MINOR`` protocol version."""
    return int(version.split(".", 1)[0])


class WireModel(BaseModel):
    """Base of every wire model.

    Unknown fields are ignored so a newer MINOR peer can add fields; NaN and
    infinities are refused because JSON cannot carry them faithfully.
    """

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False, frozen=False)


# --- handshake -------------------------------------------------------------


class Hello(WireModel):
    client_name: str = "sparksync"
    client_version: str = ""
    protocol_version: str = PROTOCOL_VERSION


class HelloReply(WireModel):
    agent_version: str
    protocol_version: str
    node_id: str
    run_id: str = Field(description="Changes on every agent start; sequence numbers restart with it.")
    sample_hz: float


class ErrorBody(WireModel):
    """The body of every 4xx/5xx answer: a stable code plus a sentence for people."""

    error: str
    message: str


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


# --- workloads: what the client sends to start one rank ----------------------
#
# The agent's process supervisor receives one ``RankLaunch`` per process and
# needs nothing else to start it, tell when it is ready, and read its tokens/s.
#
# Launch order: every launch of a group carries a ``stage``. The launches of
# stage 0 start first and must all be ready before stage 1 starts, and so on
# (an ``rpc-server`` before the ``llama-server`` that connects to it; a Ray
# head, then its workers, then ``vllm serve``). The client drives the stages.

# Named groups a training log pattern may capture; tokens_per_s is required.
TOKENS_GROUP = "tokens_per_s"
LOG_GROUPS = (TOKENS_GROUP, "step", "loss")

# Workload ids and process names become directory names on the node.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$"

Port = Annotated[int, Field(ge=1, le=65535)]


class ReadinessProbe(WireModel):
    """How the agent tells that a rank is ready.

    - ``http``: GET ``http://host:port/path`` answers 200 (``/health``, ``/v1/models``);
    - ``tcp``: something accepts connections on ``host:port`` (``rpc-server`` speaks no HTTP);
    - ``log``: a line of the rank's output matches ``pattern`` (a Python regex);
    - ``process``: the process is running; used by ranks that serve nothing
      themselves and whose group is ready when its head is.
    """

    kind: Literal["http", "tcp", "log", "process"]
    host: str = "127.0.0.1"
    port: Port | None = None
    path: str | None = None
    pattern: str | None = None
    timeout_s: float = Field(600.0, gt=0, description="Give up (and report the rank failed) after this.")
    interval_s: float = Field(0.5, gt=0)

    @model_validator(mode="after")
    def _complete(self) -> ReadinessProbe:
        if self.kind in ("http", "tcp") and self.port is None:
            raise ValueError(f"a {self.kind} readiness probe needs a port")
        if self.kind == "http" and not (self.path or "").startswith("/"):
            raise ValueError("an http readiness probe needs a path starting with '/', e.g. /health")
        if self.kind == "log":
            _compile(self.pattern, "readiness pattern")
        return self


class TokensSource(WireModel):
    """Where the agent reads a rank's tokens/s.

    - ``prometheus``: counters on ``http://host:port/path``; the agent turns
      them into a rate per second (decode from ``decode_counter``, prefill
      from ``prefill_counter``);
    - ``log``: lines matching ``pattern``, whose named group ``tokens_per_s``
      is a rate already (thousands separators allowed, as in nanochat's
      ``tok/sec: 4,649``); optional groups ``step`` and ``loss``;
    - ``none``: this rank reports no tokens.

    ``scope`` says how ranks combine: ``rank`` figures add up across the
    group's ranks; a ``workload`` figure already covers the whole group
    (nanochat prints the global batch's tokens/s on rank 0 only).
    """

    kind: Literal["prometheus", "log", "none"] = "none"
    host: str = "127.0.0.1"
    port: Port | None = None
    path: str = "/metrics"
    decode_counter: str | None = None
    prefill_counter: str | None = None
    pattern: str | None = None
    scope: Literal["rank", "workload"] = "rank"

    @model_validator(mode="after")
    def _complete(self) -> TokensSource:
        if self.kind == "prometheus" and (self.port is None or not self.decode_counter):
            raise ValueError("a prometheus tokens source needs a port and a decode_counter")
        if self.kind == "log":
            compiled = _compile(self.pattern, "tokens pattern")
            if TOKENS_GROUP not in compiled.groupindex:
                raise ValueError(f"the tokens pattern needs a named group (?P<{TOKENS_GROUP}>...)")
        return self


NO_TOKENS = TokensSource()


class RestartPolicy(WireModel):
    """Whether the agent starts a rank again when it fails, and when it gives up.

    A failure is an exit the agent did not ask for (any exit for a server; a
    non-zero one for a job). Restarts wait ``backoff_s``, doubling per failure
    in the window up to ``backoff_max_s``; ``max_failures`` failures within
    ``window_s`` seconds end it with the state ``failed``.
    """

    mode: Literal["never", "on-failure"] = "never"
    max_failures: int = Field(3, ge=1, le=1000)
    window_s: float = Field(300.0, gt=0)
    backoff_s: float = Field(1.0, ge=0)
    backoff_max_s: float = Field(60.0, ge=0)


class RankLaunch(WireModel):
    """One process of a workload, started by ``node``'s agent.

    ``env`` is set on top of the agent's own environment. ``rank`` is the
    node's rank within its group (0 is the head); a node may run more than
    one process (a Ray head and ``vllm serve``), told apart by ``role``.
    ``stop_argv``, when given, is run after the process is signalled, for
    engines whose real work lives outside the process group (a container).
    Without ``cwd`` the process runs in its own directory under the agent's
    state directory (where its log is). ``restart`` says whether the agent
    starts it again when it fails.
    """

    group: str = Field(description="The group (one replica) this rank belongs to, e.g. 'qwen-1'.")
    node: str
    rank: int = Field(ge=0)
    role: str = Field(description="What this process is: 'llama-server', 'rpc-server', 'ray-head'...")
    stage: int = Field(0, ge=0)
    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    ports: list[int] = Field(default_factory=list, description="Ports it listens on: checked free first.")
    readiness: ReadinessProbe
    tokens_source: TokensSource = Field(default_factory=TokensSource)
    log_name: str
    stop_argv: list[str] = Field(default_factory=list)
    restart: RestartPolicy = Field(default_factory=RestartPolicy)

    @property
    def process_name(self) -> str:
        """How this process is called on its node: unique within its workload there."""
        return f"{self.group}.{self.rank}.{self.role}"


def _compile(pattern: str | None, what: str) -> re.Pattern[str]:
    if not pattern:
        raise ValueError(f"a log {what} is needed")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"the {what} {pattern!r} is not a valid regular expression ({exc})") from None


class RankStart(WireModel):
    """``POST /v1/workloads``: start ``launch`` as part of workload ``workload_id`` on this node.

    The agent refuses a workload id or process name that does not match
    ``NAME_PATTERN``: both name directories on the node.
    """

    workload_id: str
    launch: RankLaunch


# --- workloads: what the agent reports -------------------------------------


class RankState(str, Enum):
    starting = "starting"  # running, readiness probe not yet passed
    ready = "ready"
    restarting = "restarting"  # failed; waiting out the backoff before the next attempt
    stopping = "stopping"
    stopped = "stopped"  # ended because it was asked to
    exited = "exited"  # ended by itself with status 0 (a job that finished)
    failed = "failed"  # ended by itself otherwise, never got ready, or restarts gave up
    lost = "lost"  # ended while no agent watched, and its exit status is unknown

    @property
    def finished(self) -> bool:
        return self in (RankState.stopped, RankState.exited, RankState.failed, RankState.lost)


class RankStatus(WireModel):
    workload_id: str
    name: str = Field(description="The process name on this node: '<group>.<rank>.<role>'.")
    group: str
    rank: int
    role: str
    state: RankState
    pid: int | None = Field(None, description="The rank's process group leader while it runs.")
    attempt: int = Field(1, description="1 for the first start, +1 per restart.")
    started_at: float | None = None
    ready_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = Field(None, description="The command's exit status, when it exited.")
    exit_signal: int | None = Field(None, description="The signal that ended it, when one did.")
    message: str | None = Field(None, description="Why it failed, gave up or was lost, for people.")
    last_lines: list[str] = Field(default_factory=list, description="The last log lines, on failure.")
    log_last_seq: int = 0
    ports: list[int] = Field(default_factory=list)
    argv: list[str] = Field(default_factory=list)


class WorkloadStatus(WireModel):
    workload_id: str
    ranks: list[RankStatus]


class WorkloadList(WireModel):
    workloads: list[WorkloadStatus]


class LogLine(WireModel):
    seq: int = Field(ge=1)
    text: str


class LogPage(WireModel):
    """Lines of one process's output with seq > ``since``, oldest first."""

    workload_id: str
    name: str
    since: int
    lines: list[LogLine]
    last_seq: int
    lost: int = Field(0, description="Lines after 'since' that the agent's buffer no longer holds.")


class WorkloadFigures(WireModel):
    """One running rank's live figures, as they join the telemetry."""

    workload_id: str
    name: str
    group: str
    rank: int
    role: str
    state: RankState
    scope: Literal["rank", "workload"] = "rank"
    decode_tps: float | None = Field(None, description="Generated tokens per second (training: tokens/s).")
    prefill_tps: float | None = Field(None, description="Prompt tokens processed per second.")
    loss: float | None = None
    step: int | None = None


# --- engines ----------------------------------------------------------------


class EngineCheck(WireModel):
    """One thing an engine needs, found on this node or not (and why not)."""

    name: str = Field(description="e.g. 'llama-server', 'python:vllm', 'docker', 'image:nvcr.io/...'.")
    kind: Literal["binary", "python", "container-runtime", "container-image"]
    available: bool
    version: str | None = None
    path: str | None = None
    missing: str | None = Field(None, description="Why it is not available, for people.")


class EngineReport(WireModel):
    checked_at: float
    checks: list[EngineCheck]
    engines: dict[str, bool] = Field(
        default_factory=dict, description="Engine -> whether everything it needs was found."
    )
    missing: dict[str, list[str]] = Field(default_factory=dict, description="Engine -> what it lacks.")


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
