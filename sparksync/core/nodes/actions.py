"""Renaming a paired node, everywhere its name is used on this computer.

A node's name is its registry key, its SSH alias in the exported ssh config
and part of its keyring entries (``node/<name>/agent-token``). Renaming
changes all three; the node itself is not contacted (nothing there holds the
name). The registry changes first: if the keyring then fails, the rename
stands and the result says which entries to move by hand.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sparksync.core.ssh.client_key import KEY_FILE
from sparksync.core.nodes.registry import PairedNode, Registry, check_node_name
from sparksync.core.ssh.secrets import KeyringUnavailableError, SecretStore
from sparksync.core.ssh.unpair import NODE_SECRET_KINDS, node_secret_name
from sparksync.core.ssh.config_export import CONFIG_FILE, export_ssh_config

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RenameResult:
    node: PairedNode
    old_name: str
    secrets_moved: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def rename_node(
    old: str, new: str, *, registry: Registry | None = None, secrets: SecretStore | None = None
) -> RenameResult:
    """Rename paired node ``old`` to ``new`` (registry, ssh config export, keyring entries)."""
    registry = registry if registry is not None else Registry()
    check_node_name(new)
    node = registry.rename(old, new)
    if new == old:
        return RenameResult(node, old)
    moved, warnings = _move_secrets(old, new, secrets or SecretStore())
    _refresh_export(registry)
    log.info("renamed node %s to %s", old, new)
    return RenameResult(node, old, moved, warnings)


def _move_secrets(old: str, new: str, secrets: SecretStore) -> tuple[list[str], list[str]]:
    moved: list[str] = []
    try:
        for kind in NODE_SECRET_KINDS:
            value = secrets.get(node_secret_name(old, kind))
            if value is None:
                continue
            secrets.set(node_secret_name(new, kind), value)  # copy first: a failure loses nothing
            secrets.delete(node_secret_name(old, kind))
            moved.append(kind)
    except Exception as exc:  # noqa: BLE001 - keyring backends raise their own types
        reason = exc.reason if isinstance(exc, KeyringUnavailableError) else type(exc).__name__
        warning = (
            f"The node is renamed, but its keyring entries could not be moved ({reason}). Move the entries "
            f"'{node_secret_name(old, '*')}' of service {secrets.service!r} to "
            f"'{node_secret_name(new, '*')}' with your keyring's tool, or re-deploy the agent."
        )
        return moved, [warning]
    return moved, []


def _refresh_export(registry: Registry) -> None:
    # The alias in an exported ssh config is the node's name: rewrite it if the user exported one.
    directory = registry.path.parent
    if (directory / CONFIG_FILE).exists():
        export_ssh_config(registry.list(), directory / "keys" / KEY_FILE, directory)
