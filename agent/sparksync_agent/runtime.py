"""Everything a running agent holds, in one object the API reads from."""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sparksync_agent.collectors import CollectorSet
from sparksync_agent.protocol import AGENT_VERSION, PROTOCOL_VERSION, AgentStatus, NodeInfo, Snapshot
from sparksync_agent.sampler import Sampler

if TYPE_CHECKING:
    from sparksync_agent.advertise import Advertiser
    from sparksync_agent.engines.detect import EngineDetector
    from sparksync_agent.fabric.service import FabricService
    from sparksync_agent.models import JobBoard, ModelStore
    from sparksync_agent.supervisor.supervisor import Supervisor

log = logging.getLogger(__name__)


@dataclass
class AgentOptions:
    state_dir: Path
    port: int = 0
    sample_hz: float = 1.0
    advertise: bool = False
    interfaces: list[str] = field(default_factory=list)
    metrics_public: bool = False
    ssh_port: int = 22
    parent_pid: int | None = None  # stop when this process is gone (the app's local agent)


class AgentRuntime:
    """The live agent: identity, sampler, and the clients streaming from it."""

    def __init__(self, options: AgentOptions, node_id: str, info: NodeInfo, collectors: CollectorSet):
        self.options = options
        self.node_id = node_id
        self.info = info
        self.run_id = uuid.uuid4().hex
        self.started_at = time.time()
        self.collectors = collectors
        self.sampler = Sampler(collectors, options.sample_hz)
        self.stream_clients = 0
        self.advertiser: Advertiser | None = None  # while mDNS is on
        self.supervisor: Supervisor | None = None  # the daemon sets it
        self.engines: EngineDetector | None = None  # the daemon sets it
        self.fabric: FabricService | None = None  # the daemon sets it
        self.models: ModelStore | None = None  # the daemon sets it
        self.model_jobs: JobBoard | None = None  # the daemon sets it
        # Set when the agent is asked to stop, so long-lived streams end at once
        # instead of holding the shutdown up.
        self.stopping = asyncio.Event()

    def snapshot(self) -> Snapshot:
        return Snapshot(
            info=self.info,
            run_id=self.run_id,
            sample_hz=self.options.sample_hz,
            latest=self.sampler.latest,
            engines=self.engines.report if self.engines is not None else None,
        )

    def status(self) -> AgentStatus:
        return AgentStatus(
            agent_version=AGENT_VERSION,
            protocol_version=PROTOCOL_VERSION,
            node_id=self.node_id,
            run_id=self.run_id,
            pid=os.getpid(),
            started_at=self.started_at,
            uptime_s=time.time() - self.started_at,
            sample_hz=self.options.sample_hz,
            last_seq=self.sampler.ring.last_seq,
            ring_capacity=self.sampler.ring.capacity,
            collectors=self.collectors.states(),
            advertising=self.advertiser is not None,
            stream_clients=self.stream_clients,
        )
