"""The paired nodes at run time: their states, links to their agents, checks and live telemetry.

- ``state``: ``NodeState`` and its transition table, ``NodeStatus``, ``StateTracker``;
- ``store``: the last known state of each node, kept between runs;
- ``agent_link``: one node's agent through an SSH tunnel (token and endpoint read over SFTP);
- ``fleet``: all nodes' links, parallel checks, state changes to a callback;
- ``follower``: every node's telemetry, resumed after a cut from the last sequence seen;
- ``remote_node``: paired nodes as ``NodeHandle``s for the GUI and the CLI.
"""

from sparksync.core.fleet.agent_link import AgentLink
from sparksync.core.fleet.fleet import Fleet, NodeReport
from sparksync.core.fleet.follower import Position, TelemetryFollower
from sparksync.core.fleet.problems import NodeProblem
from sparksync.core.fleet.state import (
    TRANSITIONS,
    Cause,
    IllegalTransitionError,
    NodeState,
    NodeStatus,
    StateTracker,
)
from sparksync.core.fleet.store import NodeStateStore

__all__ = [
    "TRANSITIONS",
    "AgentLink",
    "Cause",
    "Fleet",
    "IllegalTransitionError",
    "NodeProblem",
    "NodeReport",
    "NodeState",
    "NodeStateStore",
    "NodeStatus",
    "Position",
    "StateTracker",
    "TelemetryFollower",
]
