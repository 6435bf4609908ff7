"""Reaching a running workload's HTTP API from here: through an SSH tunnel, or at the node's address.

Engines listen on the head's loopback by default (``recipe.http_host``), so
the client reaches them through a local port forwarded over the node's SSH
transport (``TunnelReach``); an engine on this computer is on this
computer's own loopback, reached as it is. An engine bound to a wildcard or to a routable
address can be reached directly (``DirectReach``), which skips the tunnel's
copy when the client sits on the same network as the nodes.

A reach is a callable: ``with reach(endpoint) as base_url: ...`` gives the
URL (``http://host:port``, no ``/v1``) while the block runs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from sparksync.core.agents.this_computer import is_local
from sparksync.core.workloads.errors import WorkloadError
from sparksync.core.workloads.workload_store import Endpoint, WorkloadRecord

if TYPE_CHECKING:  # the SSH stack loads with the first tunnel, not with the module
    from sparksync.core.ssh.transports import NodeTransports

TUNNEL_TIMEOUT_S = 15.0
WILDCARDS = ("0.0.0.0", "::", "")

Reach = Callable[[Endpoint], AbstractContextManager[str]]


@runtime_checkable
class HasTransports(Protocol):
    """The fleet: its SSH transports are made on first use (an engine on this computer needs none)."""

    @property
    def transports(self) -> NodeTransports: ...


class TunnelReach:
    """A local port forwarded to the endpoint as the head node sees it (this computer's: as it is)."""

    def __init__(self, fleet: object, timeout: float = TUNNEL_TIMEOUT_S):
        self.fleet, self.timeout = fleet, timeout

    @contextmanager
    def __call__(self, endpoint: Endpoint) -> Iterator[str]:
        host = "127.0.0.1" if endpoint.host in WILDCARDS else endpoint.host
        if is_local(endpoint.node):
            yield f"http://{_bracketed(host)}:{endpoint.port}"
            return
        # Checked here, not up front: isinstance reads the transports property, which makes them.
        if not isinstance(self.fleet, HasTransports):
            raise WorkloadError("these nodes are not reached over SSH here, so no tunnel can be opened.")
        from sparksync.core.ssh.tunnel import open_tunnel

        tunnel = open_tunnel(self.fleet.transports, endpoint.node, endpoint.port, remote_host=host,
                             timeout=self.timeout)  # fmt: skip
        with tunnel:
            yield f"http://127.0.0.1:{tunnel.local_port}"


class DirectReach:
    """The node's own address (``addresses``: node name -> address), for engines bound beyond loopback."""

    def __init__(self, addresses: Mapping[str, str]):
        self.addresses = dict(addresses)

    @contextmanager
    def __call__(self, endpoint: Endpoint) -> Iterator[str]:
        if is_local(endpoint.node):  # from here, this computer's engine is on our own loopback
            bound = endpoint.listen if endpoint.listen is not None else endpoint.host
            yield f"http://{_bracketed('127.0.0.1' if bound in WILDCARDS else bound)}:{endpoint.port}"
            return
        yield direct_url(endpoint, self.addresses)


def direct_url(endpoint: Endpoint, addresses: Mapping[str, str]) -> str:
    """``http://address:port`` of the endpoint; refuses one that listens on its node's loopback only."""
    bound = endpoint.listen if endpoint.listen is not None else endpoint.host
    if bound not in WILDCARDS:
        if _is_loopback(bound):
            raise WorkloadError(
                f"{endpoint.group} listens on {bound} on {endpoint.node}, which only that node "
                "can reach; reach it through an SSH tunnel, or start it with --set http_host=0.0.0.0."
            )
        return f"http://{_bracketed(bound)}:{endpoint.port}"
    try:
        address = addresses[endpoint.node]
    except KeyError:
        raise WorkloadError(f"no address is known for node {endpoint.node!r}") from None
    return f"http://{_bracketed(address)}:{endpoint.port}"


def workload_endpoints(records: Sequence[WorkloadRecord], selector: str) -> list[Endpoint]:
    """The HTTP endpoints named by ``selector``: a workload id, a recipe name, or a group id.

    A recipe name picks every replica of every workload started from that
    recipe, so a pool follows the recipe as workloads come and go.
    """
    found: list[Endpoint] = []
    for record in records:
        if record.workload_id == selector or selector in record.recipes:
            found += record.endpoints
        else:
            found += [e for e in record.endpoints if e.group == selector]
    return found


@contextmanager
def open_workload(reach: Reach, records: Sequence[WorkloadRecord], selector: str) -> Iterator[list[tuple[Endpoint, str]]]:
    """Every HTTP endpoint ``selector`` names (a workload id, recipe or group), reached from here:
    ``[(endpoint, base URL)]`` while the block runs (tunnels close after it)."""
    endpoints = workload_endpoints(records, selector)
    if not endpoints:
        known = ", ".join(r.workload_id for r in records if r.endpoints) or "none"
        raise WorkloadError(f"no workload, recipe or group {selector!r} serves HTTP (workloads that do: {known}); "
                            "see `sparksync workload list`.")
    with ExitStack() as stack:
        yield [(endpoint, stack.enter_context(reach(endpoint))) for endpoint in endpoints]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
