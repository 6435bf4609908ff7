"""``sparksync node pair | unpair``: cluster membership from a terminal.

Both are ``ClusterActions`` calls (the Nodes panel's too) with options and
output. Prompts and progress go to stderr, so ``--json`` output on stdout
stays clean. Without a terminal, nothing is asked: ``--password-stdin``
gives the password and ``--accept-host-key SHA256:...`` the fingerprint to
trust (checked against what the node presents; a mismatch refuses).
"""

from __future__ import annotations

import getpass
import json
import re
import sys
from typing import Any

import click

from sparksync.cli.node_list import node_json
from sparksync.core.discovery import check_interfaces
from sparksync.core.nodes import ClusterActions
from sparksync.core.ssh import HostKeyNotAcceptedError, PairRequest, PairResult, SshSettings, UnpairResult

_FINGERPRINT_RE = re.compile(r"^SHA256:[A-Za-z0-9+/]{43}$")


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
    actions = ClusterActions(ssh_settings=SshSettings(connect_timeout_s=timeout))
    try:
        result = actions.pair(
            PairRequest(host, user, port, name, repair=repair, accept_advertised_mismatch=accept_advertised_mismatch),
            password=_password_source(password_stdin, f"{user}@{host}"),
            confirm=_confirmer(host, accept_host_key),
            progress=lambda line: click.echo(line, err=True),
            interfaces=list(interfaces) or None,
        )
    finally:
        actions.close()
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
        "node": node_json(result.node),
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
    actions = ClusterActions(ssh_settings=SshSettings(connect_timeout_s=timeout))
    try:
        result = actions.unpair(name, forget=forget, uninstall=uninstall)
    finally:
        actions.close()
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
