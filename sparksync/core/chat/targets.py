"""What the Chat tab can talk to, and the way there.

A target is a running workload's HTTP endpoint (an inference engine, or a
Switchyard gateway launched as a workload), reached through the fleet's SSH
tunnel to its head node (this computer's: on loopback), or a gateway's own
URL (one announced on this computer or added by address).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.chat.errors import ChatError
from sparksync.core.workloads.workload_store import Endpoint

LIVE_STATES = ("ready", "partly running")

# endpoint -> a context that yields the URL to it while open (``core.workloads.TunnelReach``)
Reach = Callable[[Endpoint], AbstractContextManager[str]]


@dataclass(frozen=True)
class ChatTarget:
    key: str
    label: str
    endpoint: Endpoint | None = None  # a workload's: reached through its tunnel
    url: str | None = None  # a gateway's own address


def workload_targets(rows: Iterable) -> list[ChatTarget]:
    """Every endpoint of the running workloads (``WorkloadRow``s), one target each."""
    found = []
    for row in rows:
        view = row.view
        if view.state not in LIVE_STATES:
            continue
        for endpoint in view.record.endpoints:
            label = f"{view.workload_id} · {endpoint.group} on {endpoint.node}"
            found.append(ChatTarget(f"workload:{view.workload_id}:{endpoint.group}", label, endpoint=endpoint))
    return found


def gateway_target(key: str, label: str, url: str) -> ChatTarget:
    """A Switchyard gateway known by its URL (one that runs as a workload is a workload target)."""
    return ChatTarget(f"gateway:{key}", f"Switchyard gateway {label}", url=url)


@contextmanager
def opened(target: ChatTarget, reach: Callable[[], Reach] | None) -> Iterator[str]:
    """The URL to talk to ``target`` at, while the block runs (its tunnel opened, then closed)."""
    if target.url is not None:
        yield target.url.rstrip("/")
        return
    if target.endpoint is None:
        raise ChatError(f"{target.label} has no address to talk to.")
    if reach is None:
        raise ChatError(f"{target.label} runs on a node, and this app has no way to reach it yet.")
    with ExitStack() as stack:
        try:
            url = stack.enter_context(reach()(target.endpoint))
        except SparkSyncError as exc:  # the tunnel's own errors say what happened and what to do
            raise ChatError(f"cannot reach {target.label}: {exc}") from None
        yield url
