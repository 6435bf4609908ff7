"""``sparksync switchyard ...``: the routing gateway, its explanations and its eval.

    sparksync switchyard serve --config FILE [--reach tunnel|direct]   # pools may name running workloads
    sparksync switchyard launch --config FILE --node spark-1 [--dry-run]  # the gateway as a workload on a node
    sparksync switchyard explain REQUEST.json [--config FILE] [--pool NAME] [--json]
    sparksync switchyard eval (--cases FILE | --suite bfcl [--categories A,B] [--limit N])
                              --config FILE [--concurrency C] [--max-tokens N] [--stream]
                              [--out FILE] [--json]
    sparksync switchyard eval ... --sweep large_share=1,1/2,1/4,0 [--load-s S] [--png F] [--csv F]
    sparksync switchyard layout --large R --small R --nodes a,b,... [--gateway here|NODE] [--check]
    sparksync switchyard calibrate (--cases FILE | --suite bfcl ...) --config FILE [--values V,V] [--tolerance T]
    sparksync switchyard sweeps [--limit N] [--json]        # the stored sweeps, newest first
    sparksync switchyard show-sweep ID [--json] [--png F] [--csv F]
    sparksync switchyard convert --suite bfcl [--categories A,B] [--limit N] --out FILE
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


def _cases_options(command):
    """--cases FILE, or --suite NAME with --categories and --limit: where an eval's cases come from."""
    options = [
        click.option("--cases", "cases_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="A switchyard-cases file (see docs/switchyard.md)."),
        click.option("--suite", type=click.Choice(["bfcl"]),
                     help="A public suite, from its installed package: bfcl (the Berkeley Function Calling "
                          "Leaderboard; pip install --no-deps bfcl-eval==2026.3.23)."),
        click.option("--categories", metavar="A,B,...",
                     help="The suite's categories (bfcl: simple, multiple, parallel, parallel_multiple, "
                          "irrelevance; default simple,multiple,parallel)."),
        click.option("--limit", type=click.IntRange(1), help="At most N cases, taken in turn from each category."),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


def _load_cases(cases_path: Path | None, suite: str | None, categories: str | None, limit: int | None):
    """(the cases, where they came from, the suite's label or None)."""
    from sparksync.switchyard.eval.cases import load_cases
    from sparksync.switchyard.eval.suites import load_suite, suite_label

    if (cases_path is None) == (suite is None):
        raise click.UsageError("give the cases as --cases FILE or --suite NAME (one of the two)")
    if suite is None:
        if categories or limit:
            raise click.UsageError("--categories and --limit go with --suite")
        assert cases_path is not None
        return load_cases(cases_path), str(cases_path), None
    names = [c.strip() for c in categories.split(",") if c.strip()] if categories else None
    cases = load_suite(suite, names, limit)
    label = suite_label(cases)
    return cases, f"{label}: {', '.join(cases.categories())}", label


def _sweep_options(command):
    options = [
        click.option("--sweep", metavar="PARAM=V,V,...",
                     help="Sweep the policy: large_share=1,1/2,1/4,0 (fixed_share) or threshold=0.5,1,2 (rules, "
                          "cascade). Streams the suite and a throughput load at each point."),
        click.option("--load-s", default=60.0, show_default=True, type=click.FloatRange(min=1.0),
                     help="With --sweep: seconds of throughput load per point."),
        click.option("--png", type=click.Path(dir_okay=False, path_type=Path),
                     help="With --sweep: also draw the chart (score against throughput) into this PNG."),
        click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path),
                     help="With --sweep: also write the points as CSV."),
    ]  # fmt: skip
    for option in reversed(options):
        command = option(command)
    return command


def _sweep_and_store(config, cases, origin, label, sweep, reach, concurrency, max_tokens, load_s, png, csv_path,
                     out, as_json, on_done=None):  # fmt: skip
    """Run a sweep, store it, write its files, print it; returns the report."""
    from sparksync.switchyard.eval.history import SweepHistory
    from sparksync.switchyard.eval.sweep import SweepSettings, SweepSpec, render, run_sweep, save_sweep

    spec = SweepSpec.parse(sweep)
    spec.check(config)
    history = SweepHistory()  # opened first: a history that cannot be used stops the sweep before it runs
    settings = SweepSettings(concurrency=concurrency, max_tokens=max_tokens, load_s=load_s)
    with _pool_source(config, reach) as source:
        report = run_sweep(config, cases, spec, settings, source, origin, label,
                           on_progress=lambda line: click.echo(line, err=True))  # fmt: skip
    sweep_id = history.add(report)
    path = save_sweep(report, out or data_dir() / "switchyard" / f"sweep-{time.strftime('%Y%m%d-%H%M%S')}.json")
    _sweep_files(report, png, csv_path)
    click.echo(report.model_dump_json(indent=2) if as_json else render(report))
    click.echo(f"stored as sweep {sweep_id} (sparksync switchyard show-sweep {sweep_id}); report written to {path}",
               err=True)  # fmt: skip
    return report


def _sweep_files(report, png: Path | None, csv_path: Path | None) -> None:
    from sparksync.switchyard.eval.sweep_chart import write_csv, write_png

    if png is not None:
        click.echo(f"chart written to {write_png(report, png)}", err=True)
    if csv_path is not None:
        click.echo(f"points written to {write_csv(report, csv_path)}", err=True)


@switchyard.command("eval")
@_cases_options
@_config_option
@_reach_option
@click.option("--concurrency", type=click.IntRange(1, 1024),
              help="Requests in flight. Default 8; with --sweep, 4 per replica of both pools.")  # fmt: skip
@click.option(
    "--max-tokens",
    default=256,
    show_default=True,
    type=click.IntRange(1),
    help="For cases that set no max_tokens of their own.",
)
@click.option("--stream", is_flag=True, help="Stream the answers (and measure time to first token).")
@_sweep_options
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the JSON report. Default: switchyard/eval-TIME.json (sweep-TIME.json) in the data "
    "directory.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole report as JSON.")
def eval_command(
    cases_path: Path | None,
    suite: str | None,
    categories: str | None,
    limit: int | None,
    config_path: Path | None,
    reach: str,
    concurrency: int | None,
    max_tokens: int,
    stream: bool,
    sweep: str | None,
    load_s: float,
    png: Path | None,
    csv_path: Path | None,
    out: Path | None,
    as_json: bool,
) -> None:
    """Play the cases against the gateway, the large pool alone and the small pool alone.

    With --sweep, play the suite and a throughput load at each setting of the policy instead."""
    from sparksync.switchyard.eval.history import EvalHistory
    from sparksync.switchyard.eval.play import play
    from sparksync.switchyard.eval.report import render, save_report

    cases, origin, label = _load_cases(cases_path, suite, categories, limit)
    config = _config(config_path)
    if sweep is not None:
        _sweep_and_store(config, cases, origin, label, sweep, reach, concurrency, max_tokens, load_s, png,
                         csv_path, out, as_json)  # fmt: skip
        return
    if png or csv_path:
        raise click.UsageError("--png and --csv go with --sweep")
    concurrency = concurrency or 8
    history = EvalHistory()  # opened first: a history that cannot be used stops the eval before it runs
    with _pool_source(config, reach) as source:
        report = play(config, cases, origin, concurrency, max_tokens, source, stream=stream, suite=label)
    eval_id = history.add(report)
    path = save_report(
        report, out or data_dir() / "switchyard" / f"eval-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    click.echo(report.model_dump_json(indent=2) if as_json else render(report))
    click.echo(
        f"stored as eval {eval_id} (sparksync switchyard show {eval_id}); report written to {path}", err=True
    )


@switchyard.command("convert")
@click.option("--suite", required=True, type=click.Choice(["bfcl"]), help="The public suite to convert.")
@click.option("--categories", metavar="A,B,...", help="The suite's categories (as for eval).")
@click.option("--limit", type=click.IntRange(1), help="At most N cases, taken in turn from each category.")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The switchyard-cases file to write.")  # fmt: skip
def convert_command(suite: str, categories: str | None, limit: int | None, out: Path) -> None:
    """Write a suite's cases as a switchyard-cases file (to read, edit or replay with --cases)."""
    from sparksync_agent.atomic import write_atomic

    cases, origin, _ = _load_cases(None, suite, categories, limit)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, cases.model_dump_json(indent=2, exclude_none=True, exclude_defaults=True) + "\n")
    click.echo(f"{len(cases.cases)} cases ({origin}) written to {out}")


@switchyard.command("layout")
@click.option("--large", "large_name", required=True, help="The large model's recipe (e.g. a llamacpp-rpc or vllm one).")
@click.option("--small", "small_name", required=True, help="The small model's recipe.")
@click.option("--nodes", required=True, help="2, 4 or 8 comma-separated node names; the large replicas take the first.")
@click.option("--set-large", multiple=True, metavar="KEY=VALUE", help="A field of the large recipe (as workload start --set).")
@click.option("--set-small", multiple=True, metavar="KEY=VALUE", help="A field of the small recipe.")
@click.option("--policy", "policy_kind", type=click.Choice(["fixed_share", "rules", "cascade"]), default="fixed_share",
              show_default=True, help="The gateway's routing policy.")
@click.option("--large-share", default="1/4", show_default=True, help="With fixed_share: the share sent large.")
@click.option("--threshold", type=float, help="With rules (or cascade): the score that sends a request large.")
@click.option("--gateway", "gateway_at", default="here", show_default=True, metavar="here|NODE",
              help="Serve the gateway here (until Ctrl-C; the replicas keep running), or start it on NODE as a "
                   "workload.")
@click.option("--program", default="sparksync", show_default=True,
              help="With --gateway NODE: the command that runs SparkSync there.")
@click.option("--port", default=8400, show_default=True, type=click.IntRange(1, 65535), help="The gateway's port.")
@click.option("--config-out", type=click.Path(dir_okay=False, path_type=Path),
              help=f"Where to write the gateway's config. Default: {CONFIG_NAME} in SparkSync's config directory.")
@click.option("--force", is_flag=True, help="Overwrite an existing --config-out.")
@click.option("--check", "check_only", is_flag=True, help="Show the plan and the memory check; start nothing.")
@_reach_option
def layout_command(large_name: str, small_name: str, nodes: str, set_large: tuple[str, ...],
                   set_small: tuple[str, ...], policy_kind: str, large_share: str, threshold: float | None,
                   gateway_at: str, program: str, port: int, config_out: Path | None, force: bool,
                   check_only: bool, reach: str) -> None:  # fmt: skip
    """The published layout in one step: 3 x large on 2 nodes + 2 x small on 1 node (8 nodes; or its 4- and
    2-node forms), memory checked first, started as one workload, with the gateway over it."""
    from sparksync.core.nodes import Registry
    from sparksync.core.workloads import fit_lines
    from sparksync.core.workloads import apply_overrides, parse_settings
    from sparksync.core.workloads import find_recipe
    from sparksync.switchyard.layout import Layout, LayoutRequest, start_layout

    policy: dict = {"kind": policy_kind}
    if policy_kind == "fixed_share":
        policy["large_share"] = large_share
    elif threshold is not None:
        policy["threshold"] = threshold
    request = LayoutRequest(
        large=apply_overrides(find_recipe(large_name), parse_settings(set_large)),
        small=apply_overrides(find_recipe(small_name), parse_settings(set_small)),
        nodes=tuple(n.strip() for n in nodes.split(",") if n.strip()),
        policy=policy,
        gateway_node=None if gateway_at == "here" else gateway_at,
        port=port,
    )
    plan, recipes, form, config = request.resolve()
    out = config_out or config_dir() / CONFIG_NAME
    if not check_only and out.exists() and not force:
        raise SwitchyardError(f"{out} exists; pass --force to replace it, or --config-out elsewhere")
    click.echo(f"the published layout on {len(request.nodes)} nodes: {form.describe()}")
    for gid, group in zip(plan.group_ids(), plan.groups):
        click.echo(f"  {gid:<22} {', '.join(group.nodes)}")
    from sparksync.core.fleet import Fleet

    registry = Registry()
    with Fleet(registry=registry) as fleet:
        layout = Layout(fleet, on_progress=lambda p: click.echo(f"{p.event:>8}  {p.message}", err=True))
        prepared = layout.check(plan, recipes)  # the memory check: refuses with the numbers
        for line in fit_lines(prepared.fits):
            click.echo(f"  memory: {line}")
        for warning in prepared.warnings:
            click.echo(f"sparksync: warning: {warning}", err=True)
        if check_only:
            return
        addresses = {n.name: n.host for n in registry.list()}
        started = start_layout(layout, request, prepared, out, addresses, shlex.split(program))
    view = started.replicas
    click.echo(f"workload {view.workload_id}: {len(plan.groups)} replicas {view.state} "
               f"(stop them with `sparksync workload stop {view.workload_id}`)")  # fmt: skip
    click.echo(f"gateway config written to {out}")
    if started.gateway is not None:
        click.echo(f"workload {started.gateway.workload_id}: switchyard on {request.gateway_node}, port {port}")
        return
    click.echo(f"serving the gateway here on http://127.0.0.1:{port}/v1 until Ctrl-C "
               f"(later: sparksync switchyard serve --config {out})")  # fmt: skip
    from sparksync.switchyard.announce import announced
    from sparksync.switchyard.gateway import run

    with _pool_source(config, reach) as source:
        try:
            run(config, source, on_listening=lambda url: announced(config, url))
        except KeyboardInterrupt:
            pass


@switchyard.command("calibrate")
@_cases_options
@click.option("--config", "config_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The gateway's config (TOML or JSON): its policy is swept, and the chosen setting written "
                   "into it.")  # fmt: skip
@_reach_option
@click.option("--values", metavar="V,V,...",
              help="The settings to try. Default: large_share 1,1/2,1/4,1/8,0 (fixed_share), threshold "
                   "0.25,0.5,1,2,4 (rules, cascade).")  # fmt: skip
@click.option("--tolerance", default=1.0, show_default=True, type=click.FloatRange(min=0.0),
              help="Score points below large-only that still count as keeping its score.")  # fmt: skip
@click.option("--concurrency", type=click.IntRange(1, 1024), help="Streams in flight (default: 4 per replica).")
@click.option("--max-tokens", default=256, show_default=True, type=click.IntRange(1))
@click.option("--load-s", default=60.0, show_default=True, type=click.FloatRange(min=1.0))
@click.option("--dry-run", is_flag=True, help="Sweep and choose, but leave the config as it is.")
def calibrate_command(cases_path: Path | None, suite: str | None, categories: str | None, limit: int | None,
                      config_path: Path, reach: str, values: str | None, tolerance: float,
                      concurrency: int | None, max_tokens: int, load_s: float, dry_run: bool) -> None:  # fmt: skip
    """Sweep the policy and write the smallest large share (or threshold) that keeps the score into the config."""
    from sparksync.switchyard.eval.calibrate import choose, write_setting

    cases, origin, label = _load_cases(cases_path, suite, categories, limit)
    config = _config(config_path)
    parameter = "large_share" if config.policy.kind == "fixed_share" else "threshold"
    default = "1,1/2,1/4,1/8,0" if parameter == "large_share" else "0.25,0.5,1,2,4"
    report = _sweep_and_store(config, cases, origin, label, f"{parameter}={values or default}", reach, concurrency,
                              max_tokens, load_s, None, None, None, False)  # fmt: skip
    chosen = choose(report, tolerance)
    assert chosen.setting is not None
    share = "-" if chosen.large_share is None else f"{100 * chosen.large_share:.0f}%"
    what = (f"{parameter} = {chosen.setting}: score {chosen.score:.1f} (large-only {report.anchor.score:.1f}), "
            f"{share} of requests large, {chosen.throughput_x or 0:.2f}x throughput")  # fmt: skip
    if dry_run:
        click.echo(f"would set policy.{what} (--dry-run: {config_path} unchanged)")
        return
    write_setting(config_path, parameter, chosen.setting)
    click.echo(f"set policy.{what} in {config_path}")


@switchyard.command("sweeps")
@click.option("--limit", type=click.IntRange(min=1), help="Show only the newest N sweeps.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def sweeps_command(limit: int | None, as_json: bool) -> None:
    """The stored sweeps, newest first."""
    from sparksync.switchyard.eval.history import SweepHistory, sweeps_as_json

    items = SweepHistory().list_sweeps(limit)
    if as_json:
        click.echo(sweeps_as_json(items))
        return
    if not items:
        click.echo("no Switchyard sweeps stored yet; run one with `sparksync switchyard eval --sweep ...`")
        return
    click.echo(f"{'id':>4}  {'when (UTC)':<16}  {'policy':<11}  {'swept':<28}  {'cases':>5}  {'large':>6}  summary")
    for i in items:
        swept = f"{i.parameter}={i.settings.replace(' ', '')}"
        click.echo(f"{i.id:>4}  {i.created_at:%Y-%m-%d %H:%M}  {i.policy:<11}  {swept:<28}  {i.cases:>5}  "
                   f"{_score(i.anchor_score):>6}  {i.summary or '-'}")  # fmt: skip


@switchyard.command("show-sweep")
@click.argument("sweep_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print the whole stored report.")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), help="Draw its chart into this PNG.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path), help="Write its points as CSV.")
def show_sweep_command(sweep_id: int, as_json: bool, png: Path | None, csv_path: Path | None) -> None:
    """One stored sweep: its table and summary; --png and --csv export it."""
    from sparksync.switchyard.eval.history import SweepHistory
    from sparksync.switchyard.eval.sweep import render

    report = SweepHistory().get(sweep_id)
    click.echo(report.model_dump_json(indent=2) if as_json else render(report))
    _sweep_files(report, png, csv_path)


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
