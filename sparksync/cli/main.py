"""The ``sparksync`` command.

Commands follow ``sparksync <noun> <verb>``. An expected failure (a
SparkSyncError) prints one clear line to stderr and exits with the error's
exit code; only a bug shows a traceback.
"""

from __future__ import annotations

import logging

import click

from sparksync import __version__
from sparksync.cli.apps import app
from sparksync.cli.bench import bench
from sparksync.cli.bundle import bundle
from sparksync.cli.deploy import deploy
from sparksync.cli.engine import engine
from sparksync.cli.node import node
from sparksync.cli.node_manage import add_node_commands
from sparksync.cli.pair import add_pair_commands
from sparksync.cli.plan import plan
from sparksync.cli.settings import settings
from sparksync.cli.switchyard import switchyard
from sparksync.cli.workload import workload
from sparksync.core.base import SparkSyncError
from sparksync.core.base.paths import remove_interrupted_writes


class _Cli(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except SparkSyncError as exc:
            click.echo(f"sparksync: error: {exc}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="sparksync", message="%(prog)s %(version)s")
@click.option("-v", "--verbose", count=True, help="Log more (-v: info, -vv: debug) to stderr.")
def cli(verbose: int) -> None:
    """Manage a cluster of NVIDIA DGX Spark nodes from this computer."""
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    # httpx logs every request at INFO; that is debug detail for us.
    logging.getLogger("httpx").setLevel(logging.DEBUG if verbose > 1 else logging.WARNING)
    remove_interrupted_writes()  # temp files of writers killed mid-write, e.g. the registry's


add_pair_commands(node)
add_node_commands(node)
node.add_command(deploy)
cli.add_command(node)
cli.add_command(bench)
cli.add_command(bundle)
cli.add_command(plan)
cli.add_command(switchyard)
cli.add_command(app)
cli.add_command(settings)
cli.add_command(workload)
cli.add_command(engine)


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="sparksync")
