"""``sparksync node pair | unpair | list | ssh-config``: cluster membership from a terminal.

Prompts and progress go to stderr, so ``--json`` output on stdout stays
clean. Without a terminal, nothing is asked: ``--password-stdin`` gives the
password and ``--accept-host-key SHA256:...`` the fingerprint to trust
(checked against what the node presents; a mismatch refuses).

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
``--check`` reaches every node first.
"""

from __future__ import annotations

import getpass
import json
import re
import sys
from datetime import datetime
from typing import Any

import click

from sparksync.cli.fleet_status import list_table, status_json
from sparksync.core.ssh import (
    KEY_FILE,
    ClientKey,
    HostKeyNotAcceptedError,
    PairRequest,
    PairResult,
    SecretStore,
    SshSettings,
    UnpairResult,
    export_ssh_config,
    pair_node,
    unpair_node,
)
from sparksync.core.discovery import check_interfaces
from sparksync.core.ssh.connection import node_wait_budget
from sparksync.core.ssh.pairing import with_advertised_keys
from sparksync.core.fleet import Fleet, NodeState, NodeStateStore, NodeStatus, last_seen_text
from sparksync.core.base import config_dir
from sparksync.core.nodes import PairedNode, Registry

_FINGERPRINT_RE = re.compile(r"^SHA256:[A-Za-z0-9+/]{43}$")


def add_pair_commands(group: click.Group) -> None:
    for command in (pair, unpair, list_nodes, ssh_config):
        group.add_command(command)


# --- pair ------------------------------------------------------------------------------------


_node_timeout = click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the node.",
)


@click.command("pair")
@click.argument("host")
@click.option("--user", "-u", help="Account on the node (default: your user name here).")
@click.option("--port", "-p", type=click.IntRange(1, 65535), default=22, show_default=True, help="SSH port.")
@click.option("--name", help="Name for the node (default: the node's hostname).")
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of stdin.")
@click.option(
    "--accept-host-key",
    metavar="SHA256:...",
    help="Trust the node's host key without asking, only if its fingerprint is exactly this.",
)
@click.option(
    "--accept-advertised-mismatch",
    metavar="SHA256:...",
    help="Pair although the node's mDNS advertisement names another host key, only if the presented "
    "key's fingerprint is exactly this (you checked it on the node's console).",
)
@click.option(
    "--interface",
    "interfaces",
    multiple=True,
    metavar="IP",
    help="IPv4 address of this machine to look for the node's mDNS advertisement on (repeatable). "
    "Default: all its non-loopback addresses.",
)
@click.option(
    "--repair", is_flag=True, help="Re-pair a paired node (changed host key, or our key lost there)."
)
@_node_timeout
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def pair(
    host: str,
    user: str | None,
    port: int,
    name: str | None,
    password_stdin: bool,
    accept_host_key: str | None,
    accept_advertised_mismatch: str | None,
    interfaces: tuple[str, ...],
    repair: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Pair the node at HOST: trust its host key, install this computer's key, log in once.

    \b
    The host key is cross-checked against what the node advertises over mDNS
    (SparkSync's agent publishes its fingerprints), looked up for a moment
    even when HOST is typed: a mismatch stops pairing, whatever
    --accept-host-key says, unless --accept-advertised-mismatch names the
    presented key.
    """
    user = user or getpass.getuser()
    interactive = sys.stdin.isatty() and not password_stdin
    _check_pair_options(accept_host_key, password_stdin, interactive)
    if accept_advertised_mismatch is not None and not _FINGERPRINT_RE.match(accept_advertised_mismatch):
        raise click.BadParameter(
            f"{accept_advertised_mismatch!r} is not a SHA-256 fingerprint (SHA256: and 43 characters of base64)",
            param_hint="--accept-advertised-mismatch",
        )
    if interfaces:
        check_interfaces(list(interfaces))  # a mistyped address is an error, not "nothing advertised"
    client_key = ClientKey.load_or_create(SecretStore())
    request = with_advertised_keys(
        PairRequest(host, user, port, name, repair=repair, accept_advertised_mismatch=accept_advertised_mismatch),
        interfaces=list(interfaces) or None,
    )
    result = pair_node(
        request,
        password=_password_source(password_stdin, f"{user}@{host}"),
        confirm=_confirmer(host, accept_host_key),
        client_key=client_key,
        settings=SshSettings(connect_timeout_s=timeout),
        progress=lambda line: click.echo(line, err=True),
    )
    click.echo(json.dumps(_pair_json(result), indent=2) if as_json else _pair_line(result))


def _check_pair_options(accept: str | None, password_stdin: bool, interactive: bool) -> None:
    if accept is not None and not _FINGERPRINT_RE.match(accept):
        raise click.BadParameter(
            f"{accept!r} is not a SHA-256 fingerprint; give it as ssh-keygen -l prints it (SHA256: and "
            "43 characters of base64)",
            param_hint="--accept-host-key",
        )
    if not interactive and accept is None:
        raise click.UsageError(
            "No terminal to confirm the node's host key on: check the fingerprint on the node "
            "(ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub) and pass it with --accept-host-key."
        )
    if not interactive and not password_stdin:
        raise click.UsageError(
            "No terminal to ask for the password on: pass it on stdin with --password-stdin."
        )


def _confirmer(host: str, accept: str | None):
    def confirm(fingerprint: str) -> bool:
        if accept is None:
            click.echo(f"The host key fingerprint of {host} is {fingerprint}.", err=True)
            return click.confirm("Is this the node's key? Trust it", default=False, err=True)
        if fingerprint == accept:
            return True
        raise HostKeyNotAcceptedError(
            f"{host} presents the host key {fingerprint}, not {accept} given with --accept-host-key. "
            "Pairing stopped; nothing was changed. Another machine may be answering for this address: "
            "check the fingerprint on the node before trying again."
        )

    return confirm


def _password_source(from_stdin: bool, where: str):
    def read() -> str:
        if not from_stdin:
            return click.prompt(f"Password for {where}", hide_input=True, err=True)
        line = sys.stdin.readline()
        if not line:
            raise click.UsageError("--password-stdin: standard input was empty; write the password to it.")
        return line.rstrip("\r\n")

    return read


def _pair_line(result: PairResult) -> str:
    node = result.node
    if result.already_paired:
        return f"{node.host} is already paired as {node.name!r}; nothing to do."
    verb = (
        f"Re-paired {node.name!r} (replacing the old entry)" if result.replaced else f"Paired {node.name!r}"
    )
    return f"{verb}: {node.user}@{node.host}, host key {node.host_key.fingerprint}."


def _pair_json(result: PairResult) -> dict[str, Any]:
    return {
        "node": _node_json(result.node),
        "already_paired": result.already_paired,
        "key_installed": result.key_installed,
        "replaced": result.replaced.name if result.replaced else None,
    }


# --- unpair ----------------------------------------------------------------------------------


@click.command("unpair")
@click.argument("name")
@click.option(
    "--forget", is_flag=True, help="Only drop the node here, without reaching it (our key stays there)."
)
@click.option(
    "--uninstall", is_flag=True, help="Also stop the agent on the node and remove its files first."
)
@_node_timeout
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def unpair(name: str, forget: bool, uninstall: bool, timeout: float, as_json: bool) -> None:
    """Remove this computer's key from node NAME (or id) and drop it from the cluster."""
    result = unpair_node(
        name,
        client_key=lambda: ClientKey.load_or_create(SecretStore()),
        forget=forget,
        settings=SshSettings(connect_timeout_s=timeout),
        uninstall=uninstall,
    )
    if result.agent_removed:
        click.echo(f"agent uninstalled from {name}: {result.agent_removed}", err=True)
    for warning in result.warnings:
        click.echo(f"sparksync: warning: {warning}", err=True)
    click.echo(json.dumps(_unpair_json(result), indent=2) if as_json else _unpair_line(result))


def _unpair_line(result: UnpairResult) -> str:
    node = result.node
    if result.forgotten_only:
        return f"Forgot {node.name!r} on this computer."
    where = (
        "removed this computer's key from"
        if result.key_removed
        else "this computer's key was already gone from"
    )
    return f"Unpaired {node.name!r}: {where} {node.user}@{node.host}."


def _unpair_json(result: UnpairResult) -> dict[str, Any]:
    return {
        "name": result.node.name,
        "id": result.node.node_id,
        "key_removed": result.key_removed,
        "forgotten_only": result.forgotten_only,
        "secrets_removed": result.secrets_removed,
        "warnings": result.warnings,
        "agent_removed": result.agent_removed,
    }


# --- list and ssh-config -------------------------------------------------------------------


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
        budget = node_wait_budget(timeout)
        with Fleet(settings=SshSettings.for_command(budget)) as fleet:
            fleet.check_all(timeout=budget)  # saves each node's state, read back below
    known = NodeStateStore().statuses(nodes)
    if as_json:
        click.echo(json.dumps({"nodes": [_node_json(node, *known[node.name]) for node in nodes]}, indent=2))
    elif not nodes:
        click.echo("No paired nodes. Pair one with `sparksync node pair HOST`.", err=True)
    else:
        click.echo(_table(nodes, known))


def _node_json(
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
    exported = export_ssh_config(Registry().list(), config_dir() / "keys" / KEY_FILE)
    click.echo(exported.config_path.read_text(), nl=False)
    click.echo(
        f"Written to {exported.config_path} (pinned host keys in {exported.known_hosts_path}). "
        f"Use it by adding this line at the top of ~/.ssh/config:\n  {exported.include_line()}",
        err=True,
    )
