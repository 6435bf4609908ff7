"""``sparksync node list | ssh-config``: the paired nodes, as this computer knows them.

``sparksync node list --json`` prints::

    {"nodes": [{"name": "spark-1a2b", "host": "10.0.0.5", "addresses": [...], "port": 22,
                "user": "nvidia", "host_key": {"key_type": ..., "key_base64": ..., "fingerprint": ...},
                "added_at": "...", "node_id": "3fa2c19b...", "former_names": [], "fabric": [],
                "agent_version": null, "state": "online", "cause": null, "reason": null,
                "since": "...", "last_seen": "...", "checked_at": "..."}]}

``node_id`` is the node's stable id (every store on this computer keys the
node by it); ``name`` is a label that ``node rename`` changes, and
``former_names`` the names it had before.

``state`` is the last one known (``paired`` until a check reached the node);
``--check`` reaches every node first. Without ``--check`` the command reads
two files and reaches nothing, so it loads no SSH, network or keyring code.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click

from sparksync.cli.command_clock import time_left
from sparksync.cli.fleet_status import list_table, status_json
from sparksync.core.base import config_dir
from sparksync.core.fleet import NodeState, NodeStateStore, NodeStatus, last_seen_text
from sparksync.core.nodes import PairedNode, Registry


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (shape: see the module docs).")
@click.option(
    "--check", is_flag=True, help="Reach every node now (in parallel) instead of showing the last known state."
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=20.0,
    show_default=True,
    help="With --check: seconds the whole check may take (all nodes at once; SSH connects included).",
)
def list_nodes(as_json: bool, check: bool, timeout: float) -> None:
    """List the paired nodes with their state (the last one known, or checked now with --check)."""
    nodes = Registry().list()
    if check and nodes:
        from sparksync.core.fleet import Fleet  # SSH and the keyring: only to reach the nodes
        from sparksync.core.ssh import SshSettings, node_wait_budget

        budget = node_wait_budget(time_left(timeout))  # imports and start-up count
        with Fleet(settings=SshSettings.for_command(budget)) as fleet:
            fleet.check_all(timeout=budget)  # saves each node's state, read back below
    known = NodeStateStore().statuses(nodes)
    if as_json:
        click.echo(json.dumps({"nodes": [node_json(node, *known[node.name]) for node in nodes]}, indent=2))
    elif not nodes:
        click.echo("No paired nodes. Pair one with `sparksync node pair HOST`.", err=True)
    else:
        click.echo(_table(nodes, known))


def node_json(
    node: PairedNode, status: NodeStatus | None = None, checked_at: datetime | None = None
) -> dict[str, Any]:
    # "paired" until a check (status, --check, the app) has reached the node.
    status = status or NodeStatus(name=node.name, state=NodeState.PAIRED, since=node.added_at)
    checked = checked_at.isoformat() if checked_at is not None else None
    return {**node.model_dump(mode="json"), **status_json(status), "checked_at": checked}


def _table(nodes: list[PairedNode], known: dict[str, tuple[NodeStatus, datetime | None]]) -> str:
    rows = [("NAME", "ADDRESS", "USER", "HOST KEY", "ADDED", "STATE", "LAST SEEN")]
    rows += [
        (
            n.name,
            n.host if n.port == 22 else f"{n.host}:{n.port}",
            n.user,
            n.host_key.fingerprint,
            n.added_at.strftime("%Y-%m-%d %H:%M"),
            known[n.name][0].state.value,
            last_seen_text(known[n.name][0].last_seen),
        )
        for n in nodes
    ]
    return list_table(rows)


@click.command("ssh-config")
def ssh_config() -> None:
    """Write and print an OpenSSH config snippet, so `ssh NAME` reaches each node."""
    from sparksync.core.ssh import KEY_FILE, export_ssh_config

    exported = export_ssh_config(Registry().list(), config_dir() / "keys" / KEY_FILE)
    click.echo(exported.config_path.read_text(), nl=False)
    click.echo(
        f"Written to {exported.config_path} (pinned host keys in {exported.known_hosts_path}). "
        f"Use it by adding this line at the top of ~/.ssh/config:\n  {exported.include_line()}",
        err=True,
    )
