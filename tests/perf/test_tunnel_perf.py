"""Telemetry round trip through the SSH tunnel versus straight on the node's loopback.

One lab node runs a real sshd and a real agent (``sparksync-agent serve
--sample-hz 10`` on that node's own 127.0.0.1). The client core pairs the
node from the lab's client namespace and opens a tunnel (one shared paramiko
transport, a ``direct-tcpip`` channel per connection) to the agent's port.
Then the same httpx code sends ``GET /v1/snapshot``:

- through the tunnel, from a thread inside the client namespace (the tunnel
  listens on the client namespace's loopback, as on a user's laptop);
- directly, from a thread inside the node's namespace (the anchor).

Both run in this process, in alternating blocks, so both see the same
interpreter, the same machine load and the same agent. Each route keeps one
keep-alive connection, as the client core's AgentClient does; a smaller run
with a new connection per request shows what opening a channel costs.
Target (issue 3): tunnel overhead at most 5 ms at p50.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import httpx
import pytest

from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.ssh.pairing import PairRequest, pair_node
from sparksync.core.ssh.transports import NodeTransports
from sparksync.core.ssh.tunnel import open_tunnel
from sparksync_agent.protocol import Snapshot
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.nsnet import in_netns
from tests.lab.sshd import PASSWORD
from tests.perf.lab_agents import start_agent, wait_ready
from tests.perf.probes import percentile, request_latencies
from tests.perf.report import Report, assert_targets
from tests.perf.settings import scale_from_env

pytestmark = [pytest.mark.perf, pytest.mark.lab, pytest.mark.timeout(240)]

OVERHEAD_P50_TARGET_MS = 5.0
PATH = "/v1/snapshot"
REQUESTS = max(50, round(300 * scale_from_env()))  # per route, keep-alive
NEW_CONNECTION_REQUESTS = max(10, REQUESTS // 5)  # per route, one connection each
WARMUP = 20  # the first requests on a route pay for lazy imports and first-use paths in httpx and the agent
BLOCK = 50  # the routes take turns every BLOCK requests, so slow drifts hit both alike
T = TypeVar("T")


@dataclass
class Route:
    """One route to the agent: an httpx client and the namespace its sockets must be made in."""

    netns: str
    base_url: str
    token: str
    times_s: list[float] = field(default_factory=list)
    new_connection_s: list[float] = field(default_factory=list)

    def client(self, close_after_each: bool = False) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token}"}
        if close_after_each:
            headers["Connection"] = "close"
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=10.0, trust_env=False)

    def run(self, fn: Callable[[], T]) -> T:
        # Every request runs here: a socket belongs to the namespace of the thread that made it.
        return in_netns(self.netns, fn)

    def timed(self, client: httpx.Client, count: int) -> list[float]:
        return self.run(lambda: request_latencies(client, PATH, count))


@pytest.fixture
def client_key(real_keyring) -> ClientKey:  # noqa: F811
    return ClientKey.load_or_create(SecretStore())


def test_tunnel_round_trip_overhead(ssh_lab_factory, client_key, tmp_path, perf_out):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    workdir = tmp_path / "agent"
    proc = start_agent(ssh_lab.lab, node, workdir, "--sample-hz", "10", "--no-advertise")
    agent = wait_ready(node, proc, workdir)
    try:
        pair_node(
            PairRequest(node.ip, ssh_lab.user(node), name="n1"),
            password=lambda: PASSWORD,
            confirm=lambda fingerprint: fingerprint == ssh_lab.fingerprint(node),
            client_key=client_key,
            registry=Registry(),
            dialer=ssh_lab.dialer,
        )
        with NodeTransports(client_key, dialer=ssh_lab.dialer) as links:
            tunnel = in_netns(ssh_lab.client.netns, lambda: open_tunnel(links, "n1", agent.port))
            with tunnel:
                tunneled = Route(ssh_lab.client.netns, f"http://127.0.0.1:{tunnel.local_port}", agent.token)
                direct = Route(node.netns, f"http://127.0.0.1:{agent.port}", agent.token)
                run_ids = _measure(tunneled, direct)
        # The agent listens on the node's loopback only: from the client, the tunnel is the one way in.
        reachable = _reachable(ssh_lab.client.netns, node.ip, agent.port)
    finally:
        agent.stop()
    report = _report(tunneled, direct, run_ids)
    report.check("agent unreachable without the tunnel", not reachable,
                 f"{node.ip}:{agent.port} from the client namespace: {'open' if reachable else 'refused'}")
    report.publish(perf_out)
    assert_targets(report)


def _measure(tunneled: Route, direct: Route) -> set[str]:
    """Fill both routes' timings; returns the run ids seen (one agent behind both)."""
    with tunneled.client() as via_tunnel, direct.client() as on_node:
        pairs = ((tunneled, via_tunnel), (direct, on_node))
        run_ids = {_warm_up(route, client) for route, client in pairs}
        while len(direct.times_s) < REQUESTS:
            for route, client in pairs:
                route.times_s += route.timed(client, min(BLOCK, REQUESTS - len(route.times_s)))
    for route in (tunneled, direct):
        with route.client(close_after_each=True) as client:
            route.new_connection_s = route.timed(client, NEW_CONNECTION_REQUESTS)
    return run_ids


def _warm_up(route: Route, client: httpx.Client) -> str:
    """Checks the answer is a real snapshot, then warms the route up; returns the agent's run id."""

    def snapshot() -> Snapshot:
        response = client.get(PATH)
        response.raise_for_status()
        return Snapshot.model_validate_json(response.content)

    run_id = route.run(snapshot).run_id
    route.timed(client, WARMUP)
    return run_id


def _reachable(netns: str, host: str, port: int) -> bool:
    try:
        in_netns(netns, lambda: socket.create_connection((host, port), timeout=2).close())
    except OSError:
        return False
    return True


def _report(tunneled: Route, direct: Route, run_ids: set[str]) -> Report:
    report = Report("tunnel_round_trip")
    report.note(f"GET {PATH}, {REQUESTS} per route on one keep-alive connection, in blocks of {BLOCK}")
    tunnel_ms, direct_ms = _ms(tunneled.times_s), _ms(direct.times_s)
    _percentiles(report, "tunnel", "through the SSH tunnel", tunnel_ms)
    _percentiles(report, "direct", "direct on the node's loopback", direct_ms)
    overhead = {q: percentile(tunnel_ms, q) - percentile(direct_ms, q) for q in (50, 99)}
    for q in (50, 99):
        report.figure(f"overhead_p{q}_ms", overhead[q], f"overhead (tunnel - direct), p{q}", "ms")
    ratio = percentile(tunnel_ms, 50) / percentile(direct_ms, 50)
    report.figure("ratio_tunnel_over_direct_p50", ratio, "ratio tunnel/direct (p50)", "x")
    _new_connections(report, tunneled, direct)
    report.check("both routes reach the same agent", len(run_ids) == 1, f"run ids seen: {len(run_ids)}")
    report.check("requests per route", len(tunnel_ms) == len(direct_ms) == REQUESTS,
                 f"{len(tunnel_ms)} through the tunnel, {len(direct_ms)} direct")
    report.check("tunnel overhead p50", overhead[50] <= OVERHEAD_P50_TARGET_MS,
                 f"{overhead[50]:.2f} ms, target <= {OVERHEAD_P50_TARGET_MS:g} ms")
    return report


def _ms(times_s: list[float]) -> list[float]:
    return [t * 1000 for t in times_s]


def _percentiles(report: Report, key: str, label: str, values_ms: list[float]) -> None:
    for q in (50, 99):
        report.figure(f"{key}_p{q}_ms", percentile(values_ms, q), f"{label}, p{q}", "ms")


def _new_connections(report: Report, tunneled: Route, direct: Route) -> None:
    count = NEW_CONNECTION_REQUESTS
    report.note(f"a new connection per request ({count} each; through the tunnel, each a new channel):")
    for key, route in (("tunnel", tunneled), ("direct", direct)):
        p50 = percentile(_ms(route.new_connection_s), 50)
        report.figure(f"{key}_new_connection_p50_ms", p50, f"{key}, new connection, p50", "ms")
