"""Renaming a paired node, everywhere its name is used on this computer.

A node's name is a label: every store keys the node by its stable id (see
``identity``), so its history, states, workloads, benchmark runs and keyring
entries (``node/<id>/agent-token``) stay attached without being touched. The
name is its SSH alias in the exported ssh config, which is rewritten, and
the registry keeps the old name among the node's former names, so data
written under it before ids existed still finds the node. Keyring entries
an older SparkSync kept under the name move to the id. The node itself is
not contacted (nothing there holds the name). The registry changes first:
if the keyring then fails, the rename stands and the result says which
entries to move by hand.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sparksync.core.ssh.client_key import KEY_FILE
from sparksync.core.nodes.registry import PairedNode, Registry, check_node_name
from sparksync.core.ssh.secrets import KeyringUnavailableError, SecretStore
from sparksync.core.ssh.unpair import NODE_SECRET_KINDS, legacy_secret_names, node_secret_name
from sparksync.core.ssh.config_export import CONFIG_FILE, export_ssh_config

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RenameResult:
    node: PairedNode
    old_name: str
    secrets_moved: list[str] = field(default_factory=list)  # entries moved from the old name to the id
    warnings: list[str] = field(default_factory=list)


def rename_node(
    old: str, new: str, *, registry: Registry | None = None, secrets: SecretStore | None = None
) -> RenameResult:
    """Rename paired node ``old`` (a name or id) to ``new``; its id, and all keyed by it, stay."""
    registry = registry if registry is not None else Registry()
    check_node_name(new)
    before = registry.get(old)
    node = registry.rename(old, new)
    if node.name == before.name:
        return RenameResult(node, before.name)
    moved, warnings = _move_legacy_secrets(node, secrets or SecretStore())
    _refresh_export(registry)
    log.info("renamed node %s to %s (id %s)", before.name, new, node.node_id)
    return RenameResult(node, before.name, moved, warnings)


def _move_legacy_secrets(node: PairedNode, secrets: SecretStore) -> tuple[list[str], list[str]]:
    """Entries an older SparkSync kept under a name go to the node's id (a copy first: nothing is lost)."""
    moved: list[str] = []
    try:
        for kind in NODE_SECRET_KINDS:
            for legacy in legacy_secret_names(node, kind):
                value = secrets.get(legacy)
                if value is None:
                    continue
                if secrets.get(node_secret_name(node.node_id, kind)) is None:
                    secrets.set(node_secret_name(node.node_id, kind), value)
                secrets.delete(legacy)
                if kind not in moved:
                    moved.append(kind)
    except Exception as exc:  # noqa: BLE001 - keyring backends raise their own types
        reason = exc.reason if isinstance(exc, KeyringUnavailableError) else type(exc).__name__
        warning = (
            f"The node is renamed, but its keyring entries could not be moved ({reason}). Move the entries "
            f"'node/{node.former_names[-1]}/*' of service {secrets.service!r} to "
            f"'{node_secret_name(node.node_id, '*')}' with your keyring's tool, or re-deploy the agent."
        )
        return moved, [warning]
    return moved, []


def _refresh_export(registry: Registry) -> None:
    # The alias in an exported ssh config is the node's name: rewrite it if the user exported one.
    directory = registry.path.parent
    if (directory / CONFIG_FILE).exists():
        export_ssh_config(registry.list(), directory / "keys" / KEY_FILE, directory)
