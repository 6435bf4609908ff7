"""SSH to the nodes: pairing, unpairing, one reused transport per node, and tunnels.

- ``hostkeys``: the pinned-host-key policy (never trust a key silently).
- ``authorized_keys``: pure edits of an authorized_keys file.
- ``connection``: dial, handshake, authenticate, run a command; clear errors.
- ``remote_keys``: apply those edits on a node, under a lock, atomically.
- ``pairing`` / ``unpair``: the two halves of a node's membership.
- ``transports`` / ``tunnel``: live links to paired nodes and port forwards;
- ``client_key``: this client's one ed25519 key, its passphrase in the keyring;
- ``secrets``: the only caller of keyring;
- ``config_export``: an OpenSSH config and known_hosts from the pinned keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.ssh.client_key import (
        ClientKey,
        ClientKeyError,
        KEY_FILE,
    )
    from sparksync.core.ssh.config_export import (
        export_ssh_config,
    )
    from sparksync.core.ssh.connection import (
        Dialer,
        SshSettings,
        node_wait_budget,
    )
    from sparksync.core.ssh.errors import (
        HostKeyChangedError,
        HostKeyNotAcceptedError,
        NodeOfflineError,
        PairingError,
        SshError,
    )
    from sparksync.core.ssh.pairing import (
        PairRequest,
        PairResult,
        pair_node,
    )
    from sparksync.core.ssh.secrets import (
        KeyringStatus,
        SecretStore,
    )
    from sparksync.core.ssh.ssh_agent import (
        add_key_to_ssh_agent,
    )
    from sparksync.core.ssh.transports import (
        LinkState,
        NodeTransports,
    )
    from sparksync.core.ssh.tunnel import (
        Tunnel,
        open_tunnel,
    )
    from sparksync.core.ssh.unpair import (
        UnpairResult,
        unpair_node,
    )

_WHERE = {
    "ClientKey": "client_key",
    "ClientKeyError": "client_key",
    "KEY_FILE": "client_key",
    "export_ssh_config": "config_export",
    "Dialer": "connection",
    "SshSettings": "connection",
    "node_wait_budget": "connection",
    "HostKeyChangedError": "errors",
    "HostKeyNotAcceptedError": "errors",
    "NodeOfflineError": "errors",
    "PairingError": "errors",
    "SshError": "errors",
    "PairRequest": "pairing",
    "PairResult": "pairing",
    "pair_node": "pairing",
    "KeyringStatus": "secrets",
    "SecretStore": "secrets",
    "add_key_to_ssh_agent": "ssh_agent",
    "LinkState": "transports",
    "NodeTransports": "transports",
    "Tunnel": "tunnel",
    "open_tunnel": "tunnel",
    "UnpairResult": "unpair",
    "unpair_node": "unpair",
}
__all__ = [
    "ClientKey",
    "ClientKeyError",
    "Dialer",
    "HostKeyChangedError",
    "HostKeyNotAcceptedError",
    "KEY_FILE",
    "KeyringStatus",
    "LinkState",
    "NodeOfflineError",
    "NodeTransports",
    "PairRequest",
    "PairResult",
    "PairingError",
    "SecretStore",
    "SshError",
    "SshSettings",
    "Tunnel",
    "UnpairResult",
    "add_key_to_ssh_agent",
    "export_ssh_config",
    "node_wait_budget",
    "open_tunnel",
    "pair_node",
    "unpair_node",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
