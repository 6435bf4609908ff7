"""``sparksync node rename | ssh | ssh-add | connect``: the Nodes panel's and the tray's node actions, from a terminal."""

from __future__ import annotations

import json
import os

import click

from sparksync.core.nodes import ClusterActions
from sparksync.core.apps import node_ssh_argv
from sparksync.core.ssh import add_key_to_ssh_agent


@click.command("rename")
@click.argument("old")
@click.argument("new")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def rename(old: str, new: str, as_json: bool) -> None:
    """Rename paired node OLD (its name or id) to NEW.

    \b
    The node keeps its id, and with it its history, states, workloads and
    keyring entries; its ssh alias follows the new name.
    --json prints {"id", "old", "new", "secrets_moved", "warnings"}.
    """
    actions = ClusterActions()
    try:
        result = actions.rename(old, new)
    finally:
        actions.close()
    for warning in result.warnings:
        click.echo(f"sparksync: warning: {warning}", err=True)
    if as_json:
        click.echo(json.dumps({"id": result.node.node_id, "old": result.old_name, "new": result.node.name,
                               "secrets_moved": result.secrets_moved, "warnings": result.warnings}, indent=2))  # fmt: skip
    else:
        click.echo(f"Renamed {result.old_name!r} to {result.node.name!r}.")


@click.command("ssh")
@click.argument("name")
@click.option("--print", "print_only", is_flag=True, help="Print the ssh command instead of running it.")
def ssh(name: str, print_only: bool) -> None:
    """Log in to node NAME with ssh, through SparkSync's key and pinned host key."""
    argv = node_ssh_argv(name)
    if print_only:
        click.echo(" ".join(argv))
        return
    os.execvp(argv[0], argv)


@click.command("ssh-add")
@click.option("--lifetime", type=click.IntRange(min=1), help="Seconds the ssh-agent keeps the key (ssh-add -t).")
def ssh_add(lifetime: int | None) -> None:
    """Load SparkSync's key into your running ssh-agent, with the passphrase from the keyring.

    \b
    Then plain ssh with the exported config (`sparksync node ssh-config`),
    scripts with `ssh -o BatchMode=yes`, rsync and VS Code need no passphrase.
    The key goes to ssh-add on its standard input: neither it nor its
    passphrase is written to a file.
    """
    added = add_key_to_ssh_agent(lifetime_s=lifetime)
    until = f" for {added.lifetime_s} s" if added.lifetime_s else ""
    click.echo(f"Added SparkSync's key {added.fingerprint} to the ssh-agent at {added.socket}{until}.")


@click.command("connect")
@click.option(
    "--timeout", type=click.FloatRange(min=1), default=15.0, show_default=True, help="Seconds per node."
)
@click.option("--json", "as_json", is_flag=True, help="Print {node: null or why it did not connect}.")
@click.pass_context
def connect(ctx: click.Context, timeout: float, as_json: bool) -> None:
    """Open an SSH link to every paired node and say which connect (the tray's Connect all)."""
    actions = ClusterActions()
    try:
        outcome = actions.connect_all(timeout)
    finally:
        actions.close()
    if as_json:
        click.echo(json.dumps(outcome, indent=2))
    else:
        for name, why in outcome.items():
            click.echo(f"{name}: {'connected' if why is None else why}")
        if not outcome:
            click.echo("No paired nodes. Pair one with `sparksync node pair HOST`.", err=True)
    if any(outcome.values()):
        ctx.exit(11)
