"""What keeps a node from being online, as a state, a cause and a sentence.

The SSH layer reports why a link is down as a sentence (``LinkStatus.reason``,
built by ``ssh.connection``); ``offline_cause`` turns the phrases that layer
writes into a ``Cause`` so scripts and the GUI need not parse text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.fleet.state import Cause, NodeState

if TYPE_CHECKING:
    from sparksync_agent.protocol import AgentStatus

OFFLINE_EXIT = 11
DEGRADED_EXIT = 16


class NodeProblem(SparkSyncError):
    """A node is offline or degraded; ``state``, ``cause`` and the message say how."""

    def __init__(self, state: NodeState, cause: Cause, reason: str):
        super().__init__(reason)
        self.state, self.cause, self.reason = state, cause, reason
        # The CLI's exit status: offline reads like an unreachable host, degraded has its own.
        self.exit_code = OFFLINE_EXIT if state is NodeState.OFFLINE else DEGRADED_EXIT


def offline(reason: str) -> NodeProblem:
    return NodeProblem(NodeState.OFFLINE, offline_cause(reason), reason)


def degraded(cause: Cause, reason: str) -> NodeProblem:
    return NodeProblem(NodeState.DEGRADED, cause, reason)


# (phrase in the SSH layer's message, cause); the first match wins.
_OFFLINE_PHRASES: tuple[tuple[str, Cause], ...] = (
    ("host key of node", Cause.HOST_KEY_CHANGED),
    ("connection refused", Cause.REFUSED),
    ("no answer within", Cause.TIMEOUT),
    ("not connected within", Cause.TIMEOUT),
    ("no route to host", Cause.NO_ROUTE),
    ("cannot resolve", Cause.UNRESOLVED),
    ("resolved to no address", Cause.UNRESOLVED),
    ("refused this computer's sparksync key", Cause.KEY_REFUSED),
    ("handshake", Cause.HANDSHAKE),
    ("connection lost", Cause.CONNECTION_LOST),
)


def offline_cause(reason: str) -> Cause:
    lowered = reason.lower()
    for phrase, cause in _OFFLINE_PHRASES:
        if phrase in lowered:
            return cause
    return Cause.UNREACHABLE


def collector_problem(name: str, agent: AgentStatus) -> NodeProblem | None:
    """Degraded when the agent disabled collectors after errors (its other telemetry still flows)."""
    disabled = [c for c in agent.collectors if not c.enabled]
    if not disabled:
        return None
    which = "; ".join(f"{c.name} ({c.reason or 'no reason given'})" for c in disabled)
    return degraded(
        Cause.COLLECTORS_DISABLED,
        f"The agent on {name!r} disabled collectors after errors: {which}. "
        "Its other telemetry still flows; restart the agent once the cause is fixed.",
    )
