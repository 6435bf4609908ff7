"""The nodes of the cluster: who they are, and what a user does to them.

- ``registry``: paired nodes and their pinned host keys (a versioned file, written atomically);
- ``rows``: one row per machine for the node list (discovered, paired, their states);
- ``actions`` / ``cluster_actions``: rename, and the quick actions on one node or all;
- ``pairing_session``: a pairing's steps for a face (dialog or CLI) to drive;
- ``identity``: a node's stable id, and the names that stand for it now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.nodes.actions import (
        RenameResult,
        rename_node,
    )
    from sparksync.core.nodes.cluster_actions import (
        ClusterActions,
    )
    from sparksync.core.nodes.cluster_events import (
        EventKind,
    )
    from sparksync.core.nodes.identity import (
        NodeNames,
        is_node_id,
        local_node_id,
        node_id_from_fingerprint,
    )
    from sparksync.core.nodes.pairing_session import (
        PairFunction,
        PairingSession,
    )
    from sparksync.core.nodes.registry import (
        MAX_NODES,
        PairedNode,
        Registry,
        RegistryError,
        UnknownNodeError,
        check_node_name,
    )
    from sparksync.core.nodes.rows import (
        DeployProgress,
        DeployProgressSource,
        FleetState,
        NodeRow,
        NodeRows,
        NodeState,
        NodeStateSource,
        client_agent_version,
        preload,
    )

_WHERE = {
    "RenameResult": "actions",
    "rename_node": "actions",
    "ClusterActions": "cluster_actions",
    "EventKind": "cluster_events",
    "NodeNames": "identity",
    "is_node_id": "identity",
    "local_node_id": "identity",
    "node_id_from_fingerprint": "identity",
    "PairFunction": "pairing_session",
    "PairingSession": "pairing_session",
    "MAX_NODES": "registry",
    "PairedNode": "registry",
    "Registry": "registry",
    "RegistryError": "registry",
    "UnknownNodeError": "registry",
    "check_node_name": "registry",
    "DeployProgress": "rows",
    "DeployProgressSource": "rows",
    "FleetState": "rows",
    "NodeRow": "rows",
    "NodeRows": "rows",
    "NodeState": "rows",
    "NodeStateSource": "rows",
    "client_agent_version": "rows",
    "preload": "rows",
}
__all__ = [
    "ClusterActions",
    "DeployProgress",
    "DeployProgressSource",
    "EventKind",
    "FleetState",
    "MAX_NODES",
    "NodeNames",
    "NodeRow",
    "NodeRows",
    "NodeState",
    "NodeStateSource",
    "PairFunction",
    "PairedNode",
    "PairingSession",
    "Registry",
    "RegistryError",
    "RenameResult",
    "UnknownNodeError",
    "check_node_name",
    "client_agent_version",
    "is_node_id",
    "local_node_id",
    "node_id_from_fingerprint",
    "preload",
    "rename_node",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
