"""The wire protocol between the SparkSync client and a node agent.

Every message that crosses the wire is one of these pydantic models, and this
package is the only place that defines them: the client imports it from the agent
package so both sides always agree on the shape.

Versioning: ``PROTOCOL_VERSION`` is ``MAJOR.MINOR``. A change that an older
peer cannot read bumps MAJOR; additive, optional fields bump MINOR. Client and
agent exchange versions first (``POST /v1/hello``) and refuse a different
MAJOR with an error naming both versions.
"""

# One file per area (base, telemetry, workloads); both sides import every model from here.
from sparksync_agent.protocol.base import (
    AGENT_VERSION,
    PROTOCOL_VERSION,
    ErrorBody,
    Hello,
    HelloReply,
    WireModel,
    protocol_major,
)
from sparksync_agent.protocol.telemetry import (
    AgentStatus,
    CollectorState,
    CpuSample,
    GpuProcess,
    GpuSample,
    InterfaceKind,
    MemorySample,
    NetInterfaceSample,
    NodeInfo,
    RdmaPortSample,
    Reading,
    ReadingStatus,
    Sample,
    Snapshot,
    StreamEvent,
    TelemetryPage,
)
from sparksync_agent.protocol.workloads import (
    LOG_GROUPS,
    NAME_PATTERN,
    NO_TOKENS,
    TOKENS_GROUP,
    EngineCheck,
    EngineReport,
    LogLine,
    LogPage,
    RankLaunch,
    RankStart,
    RankState,
    RankStatus,
    ReadinessProbe,
    RestartPolicy,
    TokensSource,
    WorkloadFigures,
    WorkloadList,
    WorkloadStatus,
)

__all__ = [
    "AGENT_VERSION",
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
    "LOG_GROUPS",
    "LogLine",
    "LogPage",
    "MemorySample",
    "NAME_PATTERN",
    "NO_TOKENS",
    "NetInterfaceSample",
    "NodeInfo",
    "PROTOCOL_VERSION",
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
    "StreamEvent",
    "TOKENS_GROUP",
    "TelemetryPage",
    "TokensSource",
    "WireModel",
    "WorkloadFigures",
    "WorkloadList",
    "WorkloadStatus",
    "protocol_major",
]
