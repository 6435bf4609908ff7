"""Unpairing: remove our key from the node, then the node from the registry and keyring.

Only the authorized_keys lines holding this client's key go; every other
line stays byte for byte. If the node cannot be reached (or its host key
changed), nothing is changed anywhere and the error offers ``forget``:
drop the node here only, leaving our key on the node (the message says so).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.nodes.registry import PairedNode, Registry
from sparksync.core.ssh.secrets import KeyringUnavailableError, SecretStore
from sparksync.core.ssh.connection import Dialer, Endpoint, SshSettings, connect_with_key, default_dialer
from sparksync.core.ssh.errors import UnpairError
from sparksync.core.ssh.pairing import refresh_ssh_export
from sparksync.core.ssh.remote_keys import uninstall_key

log = logging.getLogger(__name__)

# Per-node secrets kept in the keyring, each named by node_secret_name().
NODE_SECRET_KINDS = ("agent-token",)


def node_secret_name(node_id: str, kind: str) -> str:
    """A node's keyring entry, by its stable id: a rename leaves it where it is."""
    return f"node/{node_id}/{kind}"


def legacy_secret_names(node: PairedNode, kind: str) -> list[str]:
    """Where SparkSync kept the entry before ids: under the node's name (now, or before a rename)."""
    return [f"node/{name}/{kind}" for name in dict.fromkeys([node.name, *reversed(node.former_names)])]


@dataclass(frozen=True)
class UnpairResult:
    node: PairedNode
    key_removed: bool  # False: forgotten locally only, or our key was not on the node
    forgotten_only: bool
    secrets_removed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    agent_removed: str | None = None  # with uninstall: what was stopped and removed on the node


def unpair_node(
    name: str,
    *,
    client_key: ClientKey | Callable[[], ClientKey],
    registry: Registry | None = None,
    secrets: SecretStore | None = None,
    forget: bool = False,
    dialer: Dialer | None = None,
    settings: SshSettings | None = None,
    uninstall: bool = False,
) -> UnpairResult:
    """Unpair ``name``. ``client_key`` may be a loader, so ``forget`` never needs the keyring's key.

    ``uninstall`` first stops the agent on the node and removes its files (``deploy.uninstall``).
    """
    registry = registry if registry is not None else Registry()
    node = registry.get(name)
    if forget and uninstall:
        raise UnpairError(
            f"--uninstall needs to reach {name!r}, --forget does not reach it; use one of them. To remove "
            "the agent by hand: rm -rf ~/.local/share/sparksync-agent ~/.local/state/sparksync-agent"
        )
    key = None if forget else (client_key() if callable(client_key) else client_key)
    # First, while every node still trusts it: its mesh key and host key off the other nodes.
    warnings = _leave_mesh(node, registry, key, client_key, forget, dialer, settings)
    agent: list[str] = []
    removed = (
        False
        if key is None
        else _remove_our_key(node, key, dialer or default_dialer, settings or SshSettings(), agent if uninstall else None)
    )
    registry.remove(name)
    _forget_state(node)
    secrets_removed, secret_warnings = _remove_secrets(node, secrets or SecretStore())
    warnings += secret_warnings
    if key is not None:
        refresh_ssh_export(registry, key)
    if forget:
        warnings.append(
            f"{name} was only forgotten here: this computer's key may still be in "
            f"~{node.user}/.ssh/authorized_keys on {node.host}; remove its 'sparksync@' line there by hand."
        )
    log.info("unpaired %s (key removed from node: %s)", name, removed)
    return UnpairResult(node, removed, forget, secrets_removed, warnings, agent[0] if agent else None)


def _remove_our_key(
    node: PairedNode, key: ClientKey, dialer: Dialer, settings: SshSettings, agent: list[str] | None = None
) -> bool:
    endpoint = Endpoint(node.host, node.port, node.user, node.name)
    try:
        transport = connect_with_key(endpoint, node.host_key, key.pkey, dialer, settings)
    except SparkSyncError as exc:
        raise UnpairError(
            f"Cannot unpair {node.name!r}: {exc}\nNothing was changed, here or on the node. Try again "
            f"when the node is reachable, or drop it from this computer only with "
            f"`sparksync node unpair {node.name} --forget` (our key then stays on the node)."
        ) from exc
    try:
        if agent is not None:  # before our key goes: afterwards we could not come back to retry
            from sparksync.core.deploy.uninstall import uninstall_agent  # deploy builds on this package

            agent.append(uninstall_agent(transport, node.name).summary)
        return uninstall_key(transport, key.public_line(), endpoint.where)
    finally:
        transport.close()


def _leave_mesh(
    node: PairedNode,
    registry: Registry,
    key: ClientKey | None,
    client_key: ClientKey | Callable[[], ClientKey],
    forget: bool,
    dialer: Dialer | None,
    settings: SshSettings | None,
) -> list[str]:
    """Take the node's mesh key and host key off every other node of the fabric mesh.

    Refuses the unpair (nothing changed here) when a node still holding them
    cannot be reached, unless ``forget``: then what is left is a warning.
    """
    from sparksync.core.fabric.mesh import forget_member, load_mesh, remove_from_mesh  # the fabric builds on this
    from sparksync.core.fabric.node_shell import TransportShell
    from sparksync.core.ssh.transports import NodeTransports

    mesh = load_mesh()
    if node.node_id not in mesh.members:
        return []
    others = [n.name for n in registry.list() if n.node_id != node.node_id and n.node_id in mesh.members]
    if not others:
        forget_member(node.node_id)
        return []
    try:
        key = key or (client_key() if callable(client_key) else client_key)
    except SparkSyncError as exc:
        return [f"{node.name}'s mesh key may still be on {', '.join(others)} ({exc}); run "
                "`sparksync cluster mesh` again to rewrite the mesh."]
    with NodeTransports(key, registry, dialer=dialer, settings=settings) as transports:
        removal = remove_from_mesh(TransportShell(lambda: transports, registry), node.node_id, others)
    if not removal.failed:
        return []
    where = "; ".join(f"{name}: {why}" for name, why in sorted(removal.failed.items()))
    if forget:
        return [f"{node.name}'s mesh key and host key are still on {', '.join(sorted(removal.failed))} ({where}); "
                "`sparksync cluster mesh` takes them off once those nodes are reachable (or remove its "
                "'sparksync-mesh:' lines from ~/.ssh/authorized_keys and ~/.ssh/known_hosts there)."]
    raise UnpairError(
        f"Cannot unpair {node.name!r} yet: its node-to-node SSH key could not be removed from "
        f"{', '.join(sorted(removal.failed))} ({where}). It was removed from "
        f"{', '.join(removal.cleaned) or 'no other node'}; {node.name} stays paired. Try again when those nodes "
        f"are reachable, or use `sparksync node unpair {node.name} --forget` to leave it there."
    )


def _forget_state(node: PairedNode) -> None:
    from sparksync.core.fleet.store import NodeStateStore  # the fleet builds on this package

    try:
        NodeStateStore().forget(node)
    except (OSError, SparkSyncError) as exc:  # only what the next check learns again
        log.warning("unpair %s: its last known state could not be dropped: %s", node.name, exc)


def _remove_secrets(node: PairedNode, secrets: SecretStore) -> tuple[list[str], list[str]]:
    removed: list[str] = []
    try:
        for kind in NODE_SECRET_KINDS:
            names = [node_secret_name(node.node_id, kind), *legacy_secret_names(node, kind)]
            if any([secrets.delete(entry) for entry in names]):  # a list: every entry goes
                removed.append(kind)
    except Exception as exc:  # keyring backends raise their own types
        # The node is already gone from the registry; say what is left rather than fail.
        reason = exc.reason if isinstance(exc, KeyringUnavailableError) else f"{type(exc).__name__}: {exc}"
        warning = (
            f"{node.name}'s secrets could not be removed from the keyring ({reason}); remove the entries "
            f"'{node_secret_name(node.node_id, '*')}' of service {secrets.service!r} with your keyring's tool."
        )
        return removed, [warning]
    return removed, []
