"""Is the agent that deploy just started really up? Ask it, through the tunnel, as a client would.

The new agent is told apart from the one it replaced by its run id: the
endpoint file must name a run id other than the old one, and hello must
answer with that run id and the version of the bundle. A crash loop is
reported early (the supervisor counts starts; systemd counts restarts)
with the last lines of the agent's log, instead of waiting out the timeout.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from pydantic import ValidationError
from sparksync_agent.protocol import HelloReply
from sparksync_agent.state import Endpoint

from sparksync.core.agents.client import AgentClient
from sparksync.core.base.backoff import Backoff
from sparksync.core.deploy.errors import HealthCheckError
from sparksync.core.deploy.layout import LAYOUT, SERVICE_NAME
from sparksync.core.deploy.remote import RemoteNode
from sparksync.core.deploy.service import SUPERVISED, SYSTEMD, log_tail
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.ssh.transports import NodeTransports
from sparksync.core.ssh.tunnel import open_tunnel

log = logging.getLogger(__name__)

CRASHES_BEFORE_GIVING_UP = 3
HELLO_TIMEOUT_S = 5.0
# Each look costs SFTP reads (and, once the endpoint is there, a tunnel and a hello) on a node that
# is busy starting the agent: look soon, then less often; jitter keeps eight nodes out of step.
POLL = Backoff(first_s=0.1, factor=1.5, max_s=0.5, jitter=0.2)


@dataclass(frozen=True)
class AgentAnswer:
    endpoint: Endpoint
    hello: HelloReply


def read_endpoint(remote: RemoteNode) -> Endpoint | None:
    raw = remote.read_file(LAYOUT.endpoint)
    if not raw:
        return None
    try:
        return Endpoint.model_validate_json(raw)
    except ValidationError:
        return None  # being replaced right now, or damaged; the agent rewrites it at start


def ask_hello(remote: RemoteNode, transports: NodeTransports, endpoint: Endpoint) -> HelloReply:
    """hello to the agent at ``endpoint``'s loopback port, through a tunnel over the node's transport."""
    token = (remote.read_file(LAYOUT.token) or b"").decode().strip()
    if not token:
        raise HealthCheckError(f"the agent on {remote.name} has no token file ({LAYOUT.token}) yet")
    with open_tunnel(transports, remote.name, endpoint.port) as tunnel:
        with AgentClient(f"http://127.0.0.1:{tunnel.local_port}", token, timeout=HELLO_TIMEOUT_S) as client:
            return client.hello()


def current_answer(remote: RemoteNode, transports: NodeTransports) -> AgentAnswer | None:
    """The running agent's hello, or None when none answers right now."""
    endpoint = read_endpoint(remote)
    if endpoint is None:
        return None
    try:
        return AgentAnswer(endpoint, ask_hello(remote, transports, endpoint))
    except SparkSyncError as exc:
        log.debug("%s: no answer from the agent at port %d: %s", remote.name, endpoint.port, exc)
        return None


def wait_for_agent(
    remote: RemoteNode,
    transports: NodeTransports,
    *,
    version: str,
    mode: str,
    old_run_id: str | None,
    timeout_s: float,
) -> AgentAnswer:
    """Wait until a new agent answers hello with ``version``; HealthCheckError otherwise."""
    deadline = time.monotonic() + timeout_s
    last_problem = "it wrote no endpoint file"
    delays = POLL.delays()
    while True:
        remote.check_cancel("waiting for the new agent to answer")
        endpoint = read_endpoint(remote)
        if endpoint is not None and endpoint.run_id != old_run_id:
            try:
                hello = ask_hello(remote, transports, endpoint)
            except SparkSyncError as exc:
                last_problem = f"hello failed: {exc}"
            else:
                if hello.agent_version != version:
                    raise HealthCheckError(
                        f"the agent on {remote.name} answered as version {hello.agent_version}, not {version}"
                    )
                if hello.run_id == endpoint.run_id:
                    return AgentAnswer(endpoint, hello)
        crashed = _crash_loop(remote, mode)
        if crashed is not None:
            raise HealthCheckError(f"the agent {version} {crashed}; its log ends: {log_tail(remote, mode)}")
        if time.monotonic() > deadline:
            raise HealthCheckError(
                f"the agent {version} did not answer within {timeout_s:g} s ({last_problem}); its log ends: "
                f"{log_tail(remote, mode) or '(empty)'}"
            )
        remote.pause(min(next(delays), max(0.0, deadline - time.monotonic())))


def _crash_loop(remote: RemoteNode, mode: str) -> str | None:
    """How the agent keeps failing, when it does; None while it may still come up."""
    if mode == SUPERVISED:
        raw = remote.read_file(LAYOUT.supervise_state)
        try:
            state = json.loads(raw) if raw else {}
        except ValueError:
            return None
        starts, last_exit = state.get("starts", 0), state.get("last_exit")
        if starts >= CRASHES_BEFORE_GIVING_UP and last_exit not in (None, 0):
            return f"exited at start {starts} times (last exit status {last_exit})"
        return None
    if mode == SYSTEMD:
        result = remote.sh('systemctl --user show "$1" -p ActiveState -p NRestarts 2>/dev/null', SERVICE_NAME)
        fields = dict(line.partition("=")[::2] for line in result.stdout.decode().splitlines())
        restarts = int(fields.get("NRestarts", "0") or 0)
        if fields.get("ActiveState") == "failed" or restarts >= CRASHES_BEFORE_GIVING_UP:
            return f"keeps failing (systemd: {fields.get('ActiveState')}, {restarts} restarts)"
    return None
