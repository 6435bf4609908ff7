"""The ``sparksync`` command.

Commands follow ``sparksync <noun> <verb>``. An expected failure (a
SparkSyncError) prints one clear line to stderr and exits with the error's
exit code; only a bug shows a traceback. Each command's module is imported
only when that command runs (``LazyGroup``), so ``sparksync --version`` and
``sparksync node list`` load none of the SSH, HTTP, mDNS or numeric stacks
that other commands need.
"""

from __future__ import annotations

import logging

import click

from sparksync import __version__
from sparksync.cli.command_clock import mark_started
from sparksync.cli.lazy_group import LazyGroup
from sparksync.core.base import SparkSyncError
from sparksync.core.base import remove_interrupted_writes

COMMANDS = {
    "node": "sparksync.cli.node_group:node",
    "workload": "sparksync.cli.workload:workload",
    "engine": "sparksync.cli.engine:engine",
    "model": "sparksync.cli.model:model",
    "bench": "sparksync.cli.bench:bench",
    "cluster": "sparksync.cli.cluster_group:cluster",
    "plan": "sparksync.cli.plan:plan",
    "switchyard": "sparksync.cli.switchyard:switchyard",
    "bundle": "sparksync.cli.bundle:bundle",
    "app": "sparksync.cli.apps:app",
    "settings": "sparksync.cli.settings:settings",
}


class _Cli(LazyGroup):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except SparkSyncError as exc:
            click.echo(f"sparksync: error: {exc}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=_Cli, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="sparksync", message="%(prog)s %(version)s")
@click.option("-v", "--verbose", count=True, help="Log more (-v: info, -vv: debug) to stderr.")
def cli(verbose: int) -> None:
    """Manage a cluster of NVIDIA DGX Spark nodes from this computer."""
    mark_started(click.get_current_context())
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    # httpx logs every request at INFO; that is debug detail for us.
    logging.getLogger("httpx").setLevel(logging.DEBUG if verbose > 1 else logging.WARNING)
    remove_interrupted_writes()  # temp files of writers killed mid-write, e.g. the registry's


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="sparksync")
