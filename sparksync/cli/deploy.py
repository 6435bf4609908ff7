"""``sparksync node deploy [NAME...|--all]``: install or upgrade the agent on paired nodes.

Progress lines go to stderr as the nodes move through their stages
(checking, uploading, installing, starting, health); the summary table (or,
with ``--json``, one document) goes to stdout::

    {"results": [{"node": "spark-1a2b", "outcome": "deployed", "ok": true, "version": "0.1.0",
                  "service_mode": "supervised", "seconds": 12.3, "reason": null,
                  "previous_version": null, "notes": []}]}

It exits non-zero when any node did not end up running the agent. Ctrl-C
cancels: partial installs are removed, ``current`` is left as it was and the
agent that ran keeps running; the summary then says what each node was left as.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import click

from sparksync.core.deploy import (
    MODES,
    DeployCancelled,
    DeployError,
    DeployOptions,
    DeployResult,
    Outcome,
    ProgressEvent,
    Stage,
    summary_table,
)
from sparksync.core.nodes import ClusterActions, Registry

_JOIN_POLL_S = 0.2


@click.command("deploy")
@click.argument("names", nargs=-1)
@click.option("--all", "all_nodes", is_flag=True, help="Deploy to every paired node.")
@click.option(
    "--bundle",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Deploy this bundle instead of the cached one for each node's platform and Python.",
)
@click.option(
    "--service",
    "mode",
    type=click.Choice(MODES),
    help="How to keep the agent running  [default: systemd-user where it works, else supervised]",
)
@click.option("--no-advertise", is_flag=True, help="The agent does not publish itself over mDNS.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    help="Seconds to wait for each new agent to answer.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as one JSON document.")
@click.pass_context
def deploy(
    ctx: click.Context,
    names: tuple[str, ...],
    all_nodes: bool,
    bundle: Path | None,
    mode: str | None,
    no_advertise: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Install (or upgrade) the agent on the named nodes, or on all with --all."""
    actions = ClusterActions()
    try:
        targets = _targets(actions.registry, names, all_nodes)
        options = DeployOptions(bundle=bundle, mode=mode, advertise=not no_advertise, health_timeout_s=timeout)
        results = _run_cancellable(actions, targets, options)
    finally:
        actions.close()
    if as_json:
        click.echo(json.dumps({"results": [r.as_json() for r in results]}, indent=2))
    else:
        click.echo(summary_table(results))
    failed = [r for r in results if not r.ok]
    if failed:
        cancelled = any(r.outcome is Outcome.CANCELLED for r in failed)
        ctx.exit(DeployCancelled.exit_code if cancelled else DeployError.exit_code)


def _targets(registry: Registry, names: tuple[str, ...], all_nodes: bool) -> list[str]:
    if all_nodes and names:
        raise click.UsageError("Give node names or --all, not both.")
    if all_nodes:
        targets = registry.names()
        if not targets:
            raise click.UsageError("No paired nodes. Pair one with `sparksync node pair HOST`.")
        return targets
    if not names:
        raise click.UsageError("Name the nodes to deploy to (see `sparksync node list`), or use --all.")
    for name in names:
        registry.get(name)  # an unknown name stops here, naming the paired ones
    return list(dict.fromkeys(names))


def _run_cancellable(actions: ClusterActions, targets: list[str], options: DeployOptions) -> list[DeployResult]:
    """The deploy on a worker thread, so that Ctrl-C here becomes a cancel there."""
    cancel, finished = threading.Event(), threading.Event()
    box: dict[str, list[DeployResult]] = {}
    printer = _ProgressPrinter()

    def work() -> None:
        try:
            box["results"] = actions.deploy(targets, cancel, options=options, progress=printer)
        finally:
            finished.set()

    worker = threading.Thread(target=work, name="deploy-cli")
    worker.start()
    # An Event, not Thread.join: a Ctrl-C inside join() can leave the thread looking finished.
    while not finished.is_set():
        try:
            finished.wait(_JOIN_POLL_S)
        except KeyboardInterrupt:
            if not cancel.is_set():
                cancel.set()
                click.echo(
                    "sparksync: cancelling: removing partial installs; the agents that ran keep running...",
                    err=True,
                )
    worker.join()
    return box.get("results", [])


class _ProgressPrinter:
    """One stderr line per stage change, and upload progress in steps of a quarter."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, tuple[Stage, object]] = {}

    def __call__(self, event: ProgressEvent) -> None:
        # Uploads report every few percent: a line per quarter is plenty. Other stages report steps.
        quarter = int(event.fraction * 4) if event.stage is Stage.UPLOADING else event.message
        with self._lock:
            if self._last.get(event.node) == (event.stage, quarter):
                return
            self._last[event.node] = (event.stage, quarter)
            percent = f" {event.fraction:4.0%}" if event.stage is Stage.UPLOADING else ""
            detail = f": {event.message}" if event.message else ""
            click.echo(f"{event.node}: {event.stage.value}{percent}{detail}", err=True)
