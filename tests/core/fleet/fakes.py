"""A fleet whose nodes answer through scripted fake agents (no SSH, no sockets)."""

from __future__ import annotations

import threading

import httpx
from sparksync_agent.protocol import PROTOCOL_VERSION, AgentStatus, CollectorState

from sparksync.core.agents.client import AgentClient
from sparksync.core.agents.link import AgentLink
from sparksync.core.fleet.fleet import Fleet
from sparksync.core.fleet.problems import NodeProblem, degraded, offline
from sparksync.core.fleet.state import Cause
from sparksync.core.fleet.store import NodeStateStore
from sparksync.core.nodes.registry import Registry
from tests.core.fake_agent import GOOD_TOKEN, FakeAgent
from tests.core.node_factory import paired_node


def agent_status(disabled: dict[str, str] | None = None) -> AgentStatus:
    names = ["memory", "cpu", "network", "rdma"]
    collectors = [
        CollectorState(name=n, enabled=n not in (disabled or {}), reason=(disabled or {}).get(n))
        for n in names
    ]
    return AgentStatus(
        agent_version="9.9.9", protocol_version=PROTOCOL_VERSION, node_id="n1", run_id="run-1", pid=1,
        started_at=0.0, uptime_s=1.0, sample_hz=10.0, last_seq=1, ring_capacity=6600,
        collectors=collectors, advertising=False, stream_clients=0,
    )  # fmt: skip


class FakeLink(AgentLink):
    """Stands in for an SSH AgentLink: hands out a client on a FakeAgent; ``link_up`` decides offline vs degraded."""

    def __init__(self, name: str, agent: FakeAgent | None = None, disabled: dict[str, str] | None = None):
        self.name = name
        self.agent = agent or FakeAgent()
        self.agent.routes[("GET", "/v1/status")] = lambda _r: httpx.Response(
            200, json=agent_status(disabled).model_dump()
        )
        self.client = AgentClient("http://agent.test", GOOD_TOKEN, transport=self.agent.transport())
        self.link_up = True
        self.problem: NodeProblem | None = None  # raised by hello when set
        self.block_until_cancelled = False
        self.hold: threading.Event | None = None  # hello waits for it (ignoring cancel) when set
        self.rereads: list[bool] = []
        self.probe_ended = threading.Event()

    kind = "ssh"

    def open(self, cancel=None, *, reread=False):
        return self.client

    def hello(self, cancel=None, *, reread=False):
        self.rereads.append(reread)
        try:
            if self.hold is not None:
                assert self.hold.wait(60), "the test never released a held check"
            if self.block_until_cancelled:
                assert cancel is not None and cancel.wait(60), "the fleet never cancelled a slow check"
                raise offline("cancelled")
            if self.problem is not None:
                raise self.problem
            return self.client, self.client.hello()
        finally:
            self.probe_ended.set()

    def reachable(self):
        return self.link_up

    def explain(self, exc):
        if isinstance(exc, NodeProblem):
            return exc
        if not self.link_up:
            return offline("connection lost (closed by the node, or no answer to keepalives)")
        return degraded(Cause.AGENT_NOT_ANSWERING, f"agent not answering: {exc}")

    def close(self):
        self.client.close()


class FakeFleet(Fleet):
    """A real Fleet (states, store, callbacks) whose links are FakeLinks."""

    def __init__(self, tmp_path, names, **options):
        registry = Registry(tmp_path / "nodes.json")
        for index, name in enumerate(names, start=1):
            registry.add(paired_node(name, index))
        super().__init__(None, registry, store=NodeStateStore(tmp_path / "states.json"), **options)
        self.fakes = {name: FakeLink(name) for name in names}

    def agent(self, name):
        return self.fakes[name]

    def close(self):
        super().close()
        for fake in self.fakes.values():
            fake.close()
