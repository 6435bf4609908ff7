"""``sparksync switchyard ...``: the routing gateway, its explanations and its eval.

    sparksync switchyard serve --config FILE [--reach tunnel|direct]   # pools may name running workloads
    sparksync switchyard launch --config FILE --node spark-1 [--dry-run]  # the gateway as a workload on a node
    sparksync switchyard explain REQUEST.json [--config FILE] [--pool NAME] [--json]
    sparksync switchyard eval --cases FILE --config FILE [--concurrency C] [--max-tokens N]
                              [--out FILE] [--json]
    sparksync switchyard history [--limit N] [--json]       # the stored evals, newest first
    sparksync switchyard show ID [--json]                   # one stored eval's report

Without --config, the commands read ``switchyard.toml`` from SparkSync's config directory.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from sparksync.core.base import config_dir, data_dir
from sparksync.switchyard.config import SwitchyardConfig, load_config
from sparksync.switchyard.errors import SwitchyardError
from sparksync.switchyard.sources import PoolSource

CONFIG_NAME = "switchyard.toml"


def _config(path: Path | None) -> SwitchyardConfig:
    return load_config(path or config_dir() / CONFIG_NAME)


_config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"Gateway config (TOML or JSON). Default: {CONFIG_NAME} in SparkSync's config directory.",
)


@click.group()
def switchyard() -> None:
    """Route each request to a small or a large model pool, and prove it pays."""


_reach_option = click.option(
    "--reach",
    type=click.Choice(["tunnel", "direct"]),
    default="tunnel",
    show_default=True,
    help="How pools given as workloads reach their replicas: tunnel (SSH, whatever the engine binds) "
    "or direct (the node's address; the engine must listen beyond loopback).",
)


@contextmanager
def _pool_source(config: SwitchyardConfig, reach: str) -> Iterator[PoolSource | None]:
    """For pools given as workloads: their endpoints from the workload record, reached from here."""
    if not config.workload_pools():
        yield None
        return
    from sparksync.core.fleet import Fleet
    from sparksync.core.nodes import Registry
    from sparksync.core.workloads import DirectReach, TunnelReach, WorkloadStore
    from sparksync.switchyard.workload_pools import WorkloadPools

    registry = Registry()
    with Fleet(registry=registry) as fleet:
        way = (
            TunnelReach(fleet)
            if reach == "tunnel"
            else DirectReach({n.name: n.host for n in registry.list()})
        )
        source = WorkloadPools(config, WorkloadStore().list, way)
        try:
            yield source
        finally:
            source.close()


@switchyard.command("serve")
@_config_option
@click.option("--config-json", "config_json", metavar="JSON",
              help="The config itself, as JSON (how a gateway started on a node gets it).")  # fmt: skip
@_reach_option
def serve_command(config_path: Path | None, config_json: str | None, reach: str) -> None:
    """Run the OpenAI-compatible gateway until interrupted."""
    from sparksync.switchyard.config import parse_config
    from sparksync.switchyard.gateway import run

    if config_json is not None and config_path is not None:
        raise SwitchyardError("give the config as --config FILE or --config-json, not both")
    config = (
        _config(config_path)
        if config_json is None
        else parse_config(_json_object(config_json), "--config-json")
    )
    config.check_bind()  # refuse an open non-loopback bind before anything starts
    followed = "".join(f"; {pool} follows workload {sel}" for pool, sel in config.workload_pools().items())
    click.echo(
        f"switchyard: serving on http://{config.listen.host}:{config.listen.port}/v1 "
        f"(policy {config.policy.kind}; pools {', '.join(config.pools)}{followed})",
        err=True,
    )
    from sparksync.switchyard.announce import announced

    with _pool_source(config, reach) as source:
        try:
            # Announced while it listens, so the app's dashboard finds it (docs/switchyard.md).
            run(config, source, on_listening=lambda url: announced(config, url))
        except KeyboardInterrupt:
            pass


@switchyard.command("launch")
@_config_option
@click.option("--node", required=True, help="The node to run the gateway on (a paired one, or 'local').")
@click.option("--program", default="sparksync", show_default=True,
              help="The command that runs SparkSync on that node, e.g. 'python3 -m sparksync'.")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Print the workload's command and start nothing.")
def launch_command(config_path: Path | None, node: str, program: str, dry_run: bool) -> None:
    """Start the gateway on NODE as a workload (through its agent); stop it with `sparksync workload stop`."""
    from sparksync.core.nodes import Registry
    from sparksync.core.workloads import WorkloadStore
    from sparksync.switchyard.on_node import gateway_plan, gateway_recipe, node_config

    registry = Registry()
    addresses = {n.name: n.host for n in registry.list()}
    config = node_config(_config(config_path), WorkloadStore().list(), node, addresses)
    recipe = gateway_recipe(config, shlex.split(program))
    if dry_run:
        click.echo(json.dumps(recipe.custom.argv))
        return
    from sparksync.core.fleet import Fleet
    from sparksync.core.workloads import Orchestrator

    with Fleet(registry=registry) as fleet:
        orchestrator = Orchestrator(fleet, on_progress=lambda p: click.echo(p.message, err=True))
        view = orchestrator.start(
            orchestrator.prepare(gateway_plan(node), {recipe.name: recipe}, "switchyard")
        )
    click.echo(f"workload {view.workload_id}: switchyard on {node}, port {config.listen.port} "
               f"(listening on {config.listen.host})")  # fmt: skip


def _json_object(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise SwitchyardError(f"--config-json is not valid JSON: {exc}") from None


@switchyard.command("explain")
@click.argument("request_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_config_option
@click.option("--pool", help="Explain as if the X-Switchyard-Pool header named this pool.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def explain_command(request_file: Path, config_path: Path | None, pool: str | None, as_json: bool) -> None:
    """Show where REQUEST_FILE (a chat or completions body) would go, and why."""
    from sparksync.switchyard.explain import explain, render

    try:
        body = json.loads(request_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SwitchyardError(
            f"cannot read the request {request_file}: {exc}; pass a JSON request body"
        ) from None
    if not isinstance(body, dict):
        raise SwitchyardError(
            f"{request_file} holds no JSON object; pass the body you would POST to the gateway"
        )
    result = explain(_config(config_path), body, pool)
    click.echo(json.dumps(result.as_dict(), indent=2) if as_json else render(result))


@switchyard.command("eval")
@click.option(
    "--cases",
    "cases_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A switchyard-cases/1 file (see docs/switchyard.md).",
)
@_config_option
@_reach_option
@click.option("--concurrency", default=8, show_default=True, type=click.IntRange(1, 1024))
@click.option(
    "--max-tokens",
    default=256,
    show_default=True,
    type=click.IntRange(1),
    help="For cases that set no max_tokens of their own.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the JSON report. Default: switchyard/eval-TIME.json in the data directory.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole report as JSON.")
def eval_command(
    cases_path: Path,
    config_path: Path | None,
    reach: str,
    concurrency: int,
    max_tokens: int,
    out: Path | None,
    as_json: bool,
) -> None:
    """Play the cases against the gateway, the large pool alone and the small pool alone."""
    from sparksync.switchyard.eval.cases import load_cases
    from sparksync.switchyard.eval.history import EvalHistory
    from sparksync.switchyard.eval.play import play
    from sparksync.switchyard.eval.report import render, save_report

    config = _config(config_path)
    history = EvalHistory()  # opened first: a history that cannot be used stops the eval before it runs
    with _pool_source(config, reach) as source:
        report = play(config, load_cases(cases_path), cases_path, concurrency, max_tokens, source)
    eval_id = history.add(report)
    path = save_report(
        report, out or data_dir() / "switchyard" / f"eval-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    click.echo(report.model_dump_json(indent=2) if as_json else render(report))
    click.echo(
        f"stored as eval {eval_id} (sparksync switchyard show {eval_id}); report written to {path}", err=True
    )


@switchyard.command("history")
@click.option("--limit", type=click.IntRange(min=1), help="Show only the newest N evals.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def history_command(limit: int | None, as_json: bool) -> None:
    """The stored evals, newest first: scores, throughput and the gain over large-only."""
    from sparksync.switchyard.eval.history import EvalHistory, as_json_list

    items = EvalHistory().list_evals(limit)
    if as_json:
        click.echo(as_json_list(items))
        return
    if not items:
        click.echo("no Switchyard evals stored yet; run one with `sparksync switchyard eval`")
        return
    click.echo(
        f"{'id':>4}  {'when (UTC)':<16}  {'policy':<11}  {'cases':>5}  {'conc':>4}  "
        f"{'gateway':>7}  {'large':>6}  {'small':>6}  gain"
    )
    for i in items:
        click.echo(
            f"{i.id:>4}  {i.created_at:%Y-%m-%d %H:%M}  {i.policy:<11}  {i.cases:>5}  {i.concurrency:>4}  "
            f"{_score(i.score_gateway):>7}  {_score(i.score_large):>6}  {_score(i.score_small):>6}  "
            f"{i.summary or '-'}"
        )


@switchyard.command("show")
@click.argument("eval_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print the whole stored report.")
def show_command(eval_id: int, as_json: bool) -> None:
    """One stored eval: its table and headline (--json: every case's outcome)."""
    from sparksync.switchyard.eval.history import EvalHistory
    from sparksync.switchyard.eval.report import render

    report = EvalHistory().get(eval_id)
    click.echo(report.model_dump_json(indent=2) if as_json else render(report))


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
