"""A node's state, why it is in it, and which moves between states are allowed.

::

    discovered -> pairing -> paired -> deploying -> online / offline / degraded

- **online**: SSH is up and the agent answers hello with a compatible protocol.
- **offline**: SSH cannot reach the node (timeout, refused, host key changed...).
- **degraded**: SSH is up but the agent is not running, not answering, speaks
  another protocol MAJOR, its token cannot be read, or it reports disabled
  collectors.

``cause`` is a short machine-readable word (see ``Cause``), ``reason`` the
sentence a user reads. ``StateTracker`` holds one node's status and refuses
moves the table does not list, so a bug cannot, say, jump a node that is
being paired straight to online.
"""

from __future__ import annotations

import enum
import threading
from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict

from sparksync.core.base.errors import SparkSyncError


class NodeState(str, enum.Enum):
    DISCOVERED = "discovered"
    PAIRING = "pairing"
    PAIRED = "paired"
    DEPLOYING = "deploying"
    ONLINE = "online"
    OFFLINE = "offline"
    DEGRADED = "degraded"


class Cause(str, enum.Enum):
    """Why a node is offline or degraded, as a word scripts and the GUI can match on."""

    # offline: from the SSH transport
    TIMEOUT = "timeout"
    REFUSED = "refused"
    NO_ROUTE = "no-route"
    UNRESOLVED = "unresolved"
    HOST_KEY_CHANGED = "host-key-changed"
    KEY_REFUSED = "key-refused"
    HANDSHAKE = "handshake-failed"
    CONNECTION_LOST = "connection-lost"
    UNREACHABLE = "unreachable"
    # degraded: SSH is up, the agent is not well
    AGENT_NOT_INSTALLED = "agent-not-installed"
    AGENT_NOT_RUNNING = "agent-not-running"
    AGENT_NOT_ANSWERING = "agent-not-answering"
    INCOMPATIBLE = "incompatible-agent"
    TOKEN_UNREADABLE = "token-unreadable"
    TOKEN_REFUSED = "token-refused"
    COLLECTORS_DISABLED = "collectors-disabled"


_LIVE = {NodeState.ONLINE, NodeState.OFFLINE, NodeState.DEGRADED}

# Staying in a state is always allowed (a new reason, a new last_seen); these are the moves.
TRANSITIONS: dict[NodeState, frozenset[NodeState]] = {
    NodeState.DISCOVERED: frozenset({NodeState.PAIRING}),
    NodeState.PAIRING: frozenset({NodeState.PAIRED, NodeState.DISCOVERED}),  # done, or given up
    # A node paired while its agent already runs is checked straight away, without a deploy.
    NodeState.PAIRED: frozenset({NodeState.DEPLOYING, NodeState.PAIRING, *_LIVE}),
    NodeState.DEPLOYING: frozenset(_LIVE),
    # Live states move among themselves, to a (re)deploy, or to re-pairing (a changed host key).
    **{state: frozenset({NodeState.DEPLOYING, NodeState.PAIRING, *_LIVE}) for state in _LIVE},
}


class IllegalTransitionError(SparkSyncError):
    """A move the state table does not allow (a bug in the caller, never the user's doing)."""


def check_transition(name: str, old: NodeState, new: NodeState) -> None:
    if new is not old and new not in TRANSITIONS[old]:
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[old])) or "none"
        raise IllegalTransitionError(
            f"Node {name!r} cannot go from {old.value} to {new.value} "
            f"(from {old.value} it can go to: {allowed})."
        )


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class NodeStatus(BaseModel):
    """Where a node stands, as the CLI prints it and the GUI shows it."""

    model_config = ConfigDict(frozen=True)

    name: str
    state: NodeState
    cause: Cause | None = None
    reason: str | None = None
    since: datetime  # when it entered this state
    last_seen: datetime | None = None  # the last time this computer reached the node over SSH

    @property
    def reachable(self) -> bool:
        return self.state in (NodeState.ONLINE, NodeState.DEGRADED)


class StateTracker:
    """One node's status, changed only through allowed moves (thread-safe)."""

    def __init__(self, status: NodeStatus):
        self._status = status
        self._lock = threading.Lock()

    @classmethod
    def new(cls, name: str, state: NodeState = NodeState.PAIRED) -> StateTracker:
        return cls(NodeStatus(name=name, state=state, since=utc_now()))

    @property
    def status(self) -> NodeStatus:
        with self._lock:
            return self._status

    def move(
        self,
        state: NodeState,
        cause: Cause | None = None,
        reason: str | None = None,
        *,
        now: datetime | None = None,
    ) -> tuple[NodeStatus, NodeStatus]:
        """Enter ``state`` (IllegalTransitionError if not allowed); returns (old, new)."""
        now = now or utc_now()
        with self._lock:
            old = self._status
            check_transition(old.name, old.state, state)
            seen = now if state in (NodeState.ONLINE, NodeState.DEGRADED) else old.last_seen
            self._status = old.model_copy(
                update={
                    "state": state,
                    "cause": cause,
                    "reason": reason,
                    "since": now if state is not old.state else old.since,
                    "last_seen": seen,
                }
            )
            return old, self._status

    def seen(self, now: datetime | None = None) -> NodeStatus:
        """Note that the node answered (a sample arrived), without changing its state."""
        with self._lock:
            self._status = self._status.model_copy(update={"last_seen": now or utc_now()})
            return self._status


def is_change(old: NodeStatus, new: NodeStatus) -> bool:
    """A change worth telling listeners about: another state, or another cause."""
    return old.state is not new.state or old.cause is not new.cause


def last_seen_text(when: datetime | None) -> str:
    """A node's last-seen time as the node list and ``node status`` print it (local time)."""
    return "never" if when is None else when.astimezone().strftime("%Y-%m-%d %H:%M:%S")
