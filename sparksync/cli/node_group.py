"""``sparksync node ...``: the group, each of its commands imported only when it runs."""

from __future__ import annotations

import click

from sparksync.cli.lazy_group import LazyGroup

NODE_COMMANDS = {
    "status": "sparksync.cli.node:status",
    "discover": "sparksync.cli.discover:discover",
    "list": "sparksync.cli.node_list:list_nodes",
    "ssh-config": "sparksync.cli.node_list:ssh_config",
    "pair": "sparksync.cli.pair:pair",
    "unpair": "sparksync.cli.pair:unpair",
    "rename": "sparksync.cli.node_manage:rename",
    "ssh": "sparksync.cli.node_manage:ssh",
    "ssh-add": "sparksync.cli.node_manage:ssh_add",
    "connect": "sparksync.cli.node_manage:connect",
    "deploy": "sparksync.cli.deploy:deploy",
}


@click.group(cls=LazyGroup, lazy_commands=NODE_COMMANDS)
def node() -> None:
    """The nodes of the cluster, and this computer."""
