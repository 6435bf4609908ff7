"""Reaching an agent: the one seam (``AgentLink``), its local and SSH flavours, the HTTP client, streams.

- ``link``: ``AgentLink``, "an agent I can call and stream from", with one retry after a restart;
  ``NodeAgents``, what takes any node's agent by name (the fleet serves it);
- ``local_link``: this computer, through the agent the client runs on loopback (no SSH);
- ``ssh_link``: a paired node, through an SSH tunnel on its pinned-key transport;
- ``this_computer``: this computer's name as a node (``local`` on a command line);
- ``client``: ``AgentClient``, blocking calls to one agent's API (token in a header only);
- ``answers``: turning the agent's HTTP answers into models or the client's errors;
- ``stream``: the telemetry stream with resume by sequence number;
- ``local``: the agent for "this computer", run by the client on loopback.

The fleet (``sparksync.core.fleet``) hands out a link for every node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.agents.link import AGENT_TIMEOUT_S, SSH_TIMEOUT_S, AgentLink, NodeAgents
    from sparksync.core.agents.local_link import LocalLink
    from sparksync.core.agents.ssh_link import SshLink
    from sparksync.core.agents.this_computer import LOCAL_ALIAS, LOCAL_NODE_NAME, canonical_name, is_local
    from sparksync.core.agents.client import AgentClient, LogGap, LogItem
    from sparksync.core.agents.stream import (
        Connected,
        Disconnected,
        Lost,
        Restarted,
        StreamItem,
        TelemetryStream,
    )
    from sparksync.core.agents.local import LocalAgent

# name -> the module that holds it
_WHERE = {
    "AgentLink": "link",
    "NodeAgents": "link",
    "AGENT_TIMEOUT_S": "link",
    "LocalLink": "local_link",
    "SshLink": "ssh_link",
    "SSH_TIMEOUT_S": "link",
    "LOCAL_NODE_NAME": "this_computer",
    "LOCAL_ALIAS": "this_computer",
    "is_local": "this_computer",
    "canonical_name": "this_computer",
    "AgentClient": "client",
    "LogGap": "client",
    "LogItem": "client",
    "TelemetryStream": "stream",
    "Connected": "stream",
    "Disconnected": "stream",
    "Lost": "stream",
    "Restarted": "stream",
    "StreamItem": "stream",
    "LocalAgent": "local",
}
__all__ = [
    "AGENT_TIMEOUT_S",
    "AgentClient",
    "AgentLink",
    "Connected",
    "Disconnected",
    "LOCAL_ALIAS",
    "LOCAL_NODE_NAME",
    "LocalAgent",
    "LocalLink",
    "LogGap",
    "LogItem",
    "Lost",
    "NodeAgents",
    "Restarted",
    "SSH_TIMEOUT_S",
    "SshLink",
    "StreamItem",
    "TelemetryStream",
    "canonical_name",
    "is_local",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
