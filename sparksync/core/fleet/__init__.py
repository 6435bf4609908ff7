"""Every node at run time: the way to each agent, their states, checks and live telemetry.

- ``fleet``: ``Fleet``, one ``AgentLink`` per node (this computer's local one too), ``call(node, action)``,
  the states of all of them, parallel checks, state changes to listeners;
- ``state``: ``NodeState`` and its transition table, ``NodeStatus``, ``StateTracker``;
- ``problems``: what keeps a node from being online (``NodeProblem``: a state, a cause, a sentence);
- ``store``: the last known state of each node, kept between runs;
- ``follower``: every node's telemetry through its link, resumed after a cut, gaps marked;
- ``first_sample``: waiting for an agent's first telemetry sample.

Nothing is imported until used: the window imports ``state`` at start-up, and the fleet brings paramiko.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.fleet.follower import RETRY
    from sparksync.core.fleet.fleet import Fleet, NodeReport, as_fleet_state
    from sparksync.core.fleet.state import Cause, NodeState, NodeStatus, StateTracker, last_seen_text
    from sparksync.core.fleet.problems import DEGRADED_EXIT, OFFLINE_EXIT, NodeProblem, degraded, offline
    from sparksync.core.fleet.store import NodeStateStore
    from sparksync.core.fleet.follower import (
        Connecting,
        Ended,
        FollowEvent,
        Gap,
        Live,
        Position,
        Ready,
        Retrying,
        SampleIn,
        TelemetryFollower,
        Trouble,
    )
    from sparksync.core.fleet.first_sample import NoSampleError, wait_first_sample

# name -> the module that holds it
_WHERE = {
    "RETRY": "follower",
    "Fleet": "fleet",
    "NodeReport": "fleet",
    "as_fleet_state": "fleet",
    "last_seen_text": "state",
    "NodeState": "state",
    "NodeStatus": "state",
    "Cause": "state",
    "StateTracker": "state",
    "NodeProblem": "problems",
    "DEGRADED_EXIT": "problems",
    "OFFLINE_EXIT": "problems",
    "degraded": "problems",
    "offline": "problems",
    "NodeStateStore": "store",
    "TelemetryFollower": "follower",
    "FollowEvent": "follower",
    "Connecting": "follower",
    "Ready": "follower",
    "Live": "follower",
    "SampleIn": "follower",
    "Gap": "follower",
    "Trouble": "follower",
    "Retrying": "follower",
    "Ended": "follower",
    "Position": "follower",
    "NoSampleError": "first_sample",
    "wait_first_sample": "first_sample",
}
__all__ = [
    "RETRY",
    "Cause",
    "Connecting",
    "DEGRADED_EXIT",
    "Ended",
    "Fleet",
    "FollowEvent",
    "Gap",
    "Live",
    "NoSampleError",
    "NodeProblem",
    "NodeReport",
    "NodeState",
    "NodeStateStore",
    "NodeStatus",
    "OFFLINE_EXIT",
    "Position",
    "Ready",
    "Retrying",
    "SampleIn",
    "StateTracker",
    "TelemetryFollower",
    "Trouble",
    "as_fleet_state",
    "degraded",
    "last_seen_text",
    "offline",
    "wait_first_sample",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
