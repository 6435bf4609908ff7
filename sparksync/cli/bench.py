"""``sparksync bench ...``: run llama-benchy like the published figures, and keep the history.

    sparksync bench run --endpoint http://127.0.0.1:8080 --model qwen --tokenizer ~/qwen/tokenizer.json
    sparksync bench run ... --pp 512 --pp 2048 --tg 128 --runs 5       # a custom profile
    sparksync bench run ... --model-file ~/qwen/model.gguf             # each figure beside its bound
    sparksync bench list
    sparksync bench show 12
    sparksync bench compare 12 15 --format md
    sparksync bench export 12 --format png --output run12.png
    sparksync bench report 3 4 5 6 --format md                        # scaling across cluster sizes
    sparksync bench report --sweep 0f3a9c1d2e4b
    sparksync bench scale --model /models/qwen.gguf --tokenizer ~/qwen/tokenizer.json --nodes a,b,c,d
                                                 # 1, 2 and 4 nodes, each started as a workload

Each figure is shown beside the planner's bound for that test on that many
nodes (docs/planner.md), when the model's numbers are known: from
``--model-file``, or found on their own (a llama.cpp server on this machine
names its GGUF; a tokenizer folder may hold the model). A run made while
the app records the nodes' telemetry also stores the peak memory, mean
fabric traffic and energy of its time window.

``run --json`` prints the stored run (the RunRecord model, llama-benchy's
JSON in ``result``). A run that did not complete is stored all the same
(partial or failed) and the command exits non-zero: 130 when cancelled
(Ctrl-C), 36 when the benchmark failed, 30-35 when the input was refused.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click

from sparksync.core.bench import (
    API_KEY_ENV,
    DEFAULT_PROMPT_FILE,
    FORMATS,
    MAX_CLUSTER_SIZE,
    PUBLISHED,
    BenchCancelledError,
    BenchInputError,
    BenchProfile,
    BenchProgress,
    BenchRequest,
    BenchRunFailedError,
    BenchRunner,
    Endpoint,
    HistoryStore,
    RunContext,
    RunRecord,
    compare_runs,
    export_file,
    export_text,
    run_and_store,
    scaling_report,
    tables_of,
    to_markdown,
)
from sparksync.core.planner import Hardware, read_model

POSITIVE = click.IntRange(min=1)
_CUSTOM_OPTIONS = ("pp", "tg", "depth", "concurrency", "runs", "exact_tg", "no_warmup", "no_cache")


@click.group()
def bench() -> None:
    """Benchmarks like the published ones (llama-benchy), their history and scaling reports."""


def _profile_options(command):
    """The profile: the published preset, or pp/tg/depth/concurrency/runs of the user's own."""
    options = [
        click.option("--profile", "profile_name", type=click.Choice(["published", "custom"]),
                     help="published (default): concurrency 1, pp 8192, tg 256, llama-benchy's runs and warmup."),
        click.option("--pp", type=POSITIVE, multiple=True, help="Prompt tokens; repeat for several."),
        click.option("--tg", type=POSITIVE, multiple=True, help="Generated tokens; repeat for several."),
        click.option("--depth", type=click.IntRange(min=0), multiple=True,
                     help="Context depth; repeat for several."),
        click.option("--concurrency", type=POSITIVE, multiple=True, help="Requests at once; repeat for several."),
        click.option("--runs", type=POSITIVE, help="Runs per test (llama-benchy's default: 3)."),
        click.option("--exact-tg", is_flag=True, help="Ask for exactly tg tokens (ignore end of text)."),
        click.option("--no-warmup", is_flag=True, help="Skip llama-benchy's warmup request."),
        click.option("--no-cache", is_flag=True, help="Defeat the server's prompt cache."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@bench.command("run")
@click.option("--endpoint", required=True, help="The model's OpenAI endpoint, e.g. http://127.0.0.1:8080/v1.")
@click.option("--model", required=True, help="The served model name (as /v1/models lists it).")
@click.option("--tokenizer", required=True, type=click.Path(path_type=Path),
              help="The model's own tokenizer.json (or its folder); never fetched from a hub.")
@click.option("--api-key", envvar=API_KEY_ENV, help=f"The endpoint's API key (or ${API_KEY_ENV}).")
@_profile_options
@click.option("--prompt-file", type=click.Path(path_type=Path), default=DEFAULT_PROMPT_FILE,
              show_default="SparkSync's own text", help="The text prompts are cut from.")
@click.option("--nodes", "cluster_size", type=click.IntRange(1, MAX_CLUSTER_SIZE), default=1,
              show_default=True,
              help="How many nodes serve the model (recorded).")
@click.option("--node", "node_names", multiple=True, help="A node serving the model (recorded); repeat.")
@click.option("--topology", help="single, direct, ring or switch (recorded).")
@click.option("--backend", "collective_backend", help="Collective backend: nccl, roceante ... (recorded).")
@click.option("--recipe", help="The workload recipe (recorded).")
@click.option("--engine", help="The inference engine, e.g. llama.cpp, vllm (recorded).")
@click.option("--engine-version", help="The engine's version (recorded; llama.cpp's is read from /props).")
@click.option("--label", help="A note to find the run by.")
@click.option("--model-file", type=click.Path(exists=True, path_type=Path),
              help="The model's GGUF or safetensors folder, for the bound beside each figure "
                   "(default: found when the server runs here, or beside the tokenizer).")
@click.option("--bandwidth-gbs", type=click.FloatRange(min=0, min_open=True), default=273.0, show_default=True,
              help="Memory bandwidth per node, for the bound.")
@click.option("--link-gbps", type=click.FloatRange(min=0, min_open=True), default=200.0, show_default=True,
              help="Fabric link rate per node, for the bound.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored run as JSON.")
def run_cmd(endpoint: str, model: str, tokenizer: Path, api_key: str | None, profile_name: str | None,
            prompt_file: Path, model_file: Path | None, bandwidth_gbs: float, link_gbps: float, as_json: bool,
            **options) -> None:
    """Run llama-benchy against ENDPOINT and store the result in the history."""
    profile = _profile(profile_name, {k: options.pop(k) for k in _CUSTOM_OPTIONS})
    if model_file is not None:
        read_model(model_file)  # a file that is no model is refused before anything is measured
    request = BenchRequest(Endpoint.parse(endpoint, api_key), model, tokenizer, profile,
                           prompt_file=prompt_file, context=_context(options), model_file=model_file,
                           hardware=Hardware(memory_bandwidth_gbs=bandwidth_gbs, link_gbps=link_gbps))
    history = HistoryStore()
    if not as_json:
        click.echo(f"benchmarking {model} at {request.endpoint.base_url} ({profile.describe()})", err=True)
    record = run_and_store(BenchRunner(request, on_progress=_progress_printer(as_json)), history)
    _print_run(record, as_json)
    _raise_unless_complete(record, json_lines=as_json and not sys.stderr.isatty())


@bench.command("list")
@click.option("--limit", type=POSITIVE, help="Show only the newest N runs.")
@click.option("--kind", type=click.Choice(["inference", "training"]))
@click.option("--sweep", "sweep_id", help="Only the runs of one scale sweep.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def list_cmd(limit: int | None, kind: str | None, sweep_id: str | None, as_json: bool) -> None:
    """The stored runs, newest first."""
    items = HistoryStore().list_runs(limit, kind=kind, sweep_id=sweep_id)
    if as_json:
        click.echo(json.dumps([i.model_dump(mode="json") for i in items], indent=2))
        return
    if not items:
        click.echo("no benchmark runs stored yet; run one with `sparksync bench run`")
        return
    click.echo(f"{'id':>5}  {'when (UTC)':<16}  {'status':<8}  {'nodes':>5}  {'decode':>9}  {'% bound (model)':>18}  "
               f"{'prefill':>10}  {'TTFT ms':>8}  model")
    for i in items:
        decode = i.train_tps if i.kind == "training" else i.decode_tps
        bound = i.decode_percent_of_bound
        percent = "—" if bound is None else f"{bound:.1f} % ({i.bound_label})"
        click.echo(f"{i.id:>5}  {i.created_at:%Y-%m-%d %H:%M}  {i.status:<8}  {i.cluster_size:>5}  "
                   f"{_num(decode):>9}  {percent:>18}  "
                   f"{_num(i.prefill_tps):>10}  {_num(i.ttft_ms):>8}  {i.model}"
                   + (f"  [{i.label}]" if i.label else ""))


@bench.command("show")
@click.argument("run_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print the whole stored run as JSON.")
def show_cmd(run_id: int, as_json: bool) -> None:
    """One stored run: its settings and every test's figures."""
    _print_run(HistoryStore().get(run_id), as_json)


def _output_options(default: str):
    def decorate(command):
        command = click.option("--output", "-o", type=click.Path(path_type=Path),
                               help="Write to this file (png: default NAME.png in this directory).")(command)
        return click.option("--format", "fmt", type=click.Choice(FORMATS), default=default, show_default=True,
                            help="csv, json, md (Markdown) or png (a chart).")(command)
    return decorate


@bench.command("compare")
@click.argument("run_a", type=int)
@click.argument("run_b", type=int)
@_output_options("md")
def compare_cmd(run_a: int, run_b: int, fmt: str, output: Path | None) -> None:
    """Compare two runs side by side (ratio B / A): NCCL against RoCEnante, ring against switch."""
    history = HistoryStore()
    comparison = compare_runs(history.get(run_a), history.get(run_b))
    _emit(comparison, fmt, output, f"bench-compare-{run_a}-{run_b}")


@bench.command("export")
@click.argument("run_id", type=int)
@_output_options("json")
def export_cmd(run_id: int, fmt: str, output: Path | None) -> None:
    """One stored run as csv, json, md or a png chart."""
    _emit(HistoryStore().get(run_id), fmt, output, f"bench-run-{run_id}")


@bench.command("report")
@click.argument("run_ids", type=int, nargs=-1)
@click.option("--sweep", "sweep_id", help="All the runs of one scale sweep.")
@_output_options("md")
def report_cmd(run_ids: tuple[int, ...], sweep_id: str | None, fmt: str, output: Path | None) -> None:
    """A scaling report (speed-up and efficiency against 1 node) from runs at several cluster sizes."""
    history = HistoryStore()
    if sweep_id:
        run_ids += tuple(item.id for item in history.list_runs(sweep_id=sweep_id))
    if not run_ids:
        raise BenchInputError("give the ids of the runs to report on, or --sweep ID")
    report = scaling_report(history.get_many(sorted(set(run_ids))))
    _emit(report, fmt, output, f"bench-scaling-{sweep_id or '-'.join(map(str, sorted(set(run_ids))))}")


@bench.command("scale")
@click.option("--model", "model_path", required=True,
              help="The model on the head node (for llama.cpp, a .gguf path there).")
@click.option("--tokenizer", required=True, type=click.Path(path_type=Path),
              help="The model's own tokenizer.json (or its folder) on this computer.")
@click.option("--recipe", default="llamacpp-rpc", show_default=True,
              help="A recipe that splits one replica over the nodes.")
@click.option("--nodes", "node_list", help="Comma-separated node names in rank order (default: every paired "
              "node). Size N uses the first N.")
@click.option("--size", "sizes", type=click.IntRange(1, MAX_CLUSTER_SIZE), multiple=True,
              help="A cluster size to measure; repeat (default: 1, 2, 4 and 8, as many as there are nodes).")
@click.option("--served-name", help="The model name clients ask for (default: the model file's name).")
@click.option("--http-port", type=click.IntRange(1, 65535), help="The engine's HTTP port on the head.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="Any recipe field, e.g. llamacpp.threads=4.")
@click.option("--topology", help="single, direct, ring or switch: recorded for the sizes above 1.")
@click.option("--backend", "collective_backend", help="Collective backend (recorded; llama.cpp: rpc).")
@click.option("--reach", type=click.Choice(["tunnel", "direct"]), default="tunnel", show_default=True,
              help="tunnel: through SSH (works whatever the engine binds); direct: the node's address "
                   "(start the engine with --set http_host=0.0.0.0).")
@_profile_options
@click.option("--prompt-file", type=click.Path(path_type=Path), default=DEFAULT_PROMPT_FILE,
              show_default="SparkSync's own text", help="The text prompts are cut from.")
@click.option("--model-file", type=click.Path(exists=True, path_type=Path),
              help="A local copy of the model (GGUF or safetensors folder), for the bound beside each figure.")
@click.option("--bandwidth-gbs", type=click.FloatRange(min=0, min_open=True), default=273.0, show_default=True,
              help="Memory bandwidth per node, for the bound.")
@click.option("--link-gbps", type=click.FloatRange(min=0, min_open=True), default=200.0, show_default=True,
              help="Fabric link rate per node, for the bound.")
@_output_options("md")
def scale_cmd(model_path: str, tokenizer: Path, recipe: str, node_list: str | None, sizes: tuple[int, ...],
              served_name: str | None, http_port: int | None, settings: tuple[str, ...], topology: str | None,
              collective_backend: str | None, reach: str, prompt_file: Path, model_file: Path | None,
              bandwidth_gbs: float, link_gbps: float, fmt: str, output: Path | None, profile_name: str | None,
              **custom) -> None:
    """The same model and profile on 1, 2, 4 and 8 nodes, each started as a workload; one scaling report."""
    from sparksync.core.bench import DEFAULT_SIZES, ScaleSweep
    from sparksync.core.bench import SweepWorkload, WorkloadBringUp
    from sparksync.core.fleet import Fleet
    from sparksync.core.nodes import Registry
    from sparksync.core.workloads import DirectReach, Orchestrator, TunnelReach, load_fabric_settings, parse_settings

    profile = _profile(profile_name, custom)
    registry = Registry()
    nodes = [n.strip() for n in (node_list or "").split(",") if n.strip()] or registry.names()
    if not nodes:
        raise BenchInputError("no nodes to run on: pair some (`sparksync pair`) or give --nodes")
    name = served_name or Path(model_path).stem
    overrides = {**parse_settings(settings), "model": model_path, "served_name": name}
    if http_port:
        overrides.setdefault("ports", {})["http"] = http_port
    workload = SweepWorkload(recipe, nodes, name, tokenizer, overrides, topology, collective_backend, model_file)
    with Fleet(registry=registry) as fleet:
        orchestrator = Orchestrator(fleet, fabric_settings=load_fabric_settings(),
                                    on_progress=lambda p: click.echo(f"{p.event:>8}  {p.message}", err=True))
        way = TunnelReach(fleet) if reach == "tunnel" else DirectReach(
            {n.name: n.host for n in registry.list()})
        bring_up = WorkloadBringUp(orchestrator, way, workload)
        sweep = ScaleSweep(bring_up, HistoryStore(), available_nodes=min(len(nodes), MAX_CLUSTER_SIZE),
                           profile=profile, sizes=sizes or DEFAULT_SIZES, prompt_file=prompt_file,
                           on_progress=_sweep_progress(),
                           hardware=Hardware(memory_bandwidth_gbs=bandwidth_gbs, link_gbps=link_gbps))
        bring_up.check(sweep.sizes)
        click.echo(f"scale sweep {sweep.sweep_id}: {name} on {', '.join(map(str, sweep.sizes))} node(s) "
                   f"({profile.describe()})", err=True)
        result = sweep.run()
    for size, why in result.skipped.items():
        click.echo(f"sparksync: warning: {size} node(s) skipped: {why}", err=True)
    if result.report is None:
        raise BenchRunFailedError(f"no size of sweep {result.sweep_id} produced a result")
    _emit(result.report, fmt, output, f"bench-scaling-{result.sweep_id}")
    click.echo(f"stored as sweep {result.sweep_id} (sparksync bench report --sweep {result.sweep_id})", err=True)
    if result.cancelled:
        raise BenchCancelledError(f"sweep {result.sweep_id} cancelled; the sizes measured are kept")


# --- helpers ---


def _sweep_progress():
    printer = _progress_printer()
    if printer is None:
        return None
    return lambda size, p: printer(p)


def _profile(name: str | None, custom: dict) -> BenchProfile:
    chosen = {k: v for k, v in custom.items() if v not in (None, (), False)}
    if name == PUBLISHED and chosen:
        flags = ", ".join("--" + k.replace("_", "-") for k in chosen)
        raise BenchInputError(f"the published profile is fixed, so {flags} cannot change it; "
                              "drop --profile published to run a custom profile")
    if not chosen and name != "custom":
        return BenchProfile.published()
    warmup = not chosen.pop("no_warmup", False)
    return BenchProfile.build(warmup=warmup, **chosen)


def _context(options: dict) -> RunContext:
    nodes = tuple(options.pop("node_names"))
    if nodes and len(nodes) != options["cluster_size"]:
        raise BenchInputError(f"{len(nodes)} --node names given for --nodes {options['cluster_size']}; "
                              "give one name per node, or none")
    topology = options.pop("topology") or ("single" if options["cluster_size"] == 1 else None)
    return RunContext(nodes=nodes, topology=topology, **options)


def _progress_printer(as_json: bool = False):
    """A one-line progress bar on an interactive stderr; with ``--json`` on a file or pipe, one
    JSON object per update on stderr (stdout keeps the stored run's JSON); else nothing."""
    if not sys.stderr.isatty():
        return _progress_lines if as_json else None

    def show(p: BenchProgress) -> None:
        filled = int(p.fraction * 30)
        rate = f"{p.tokens_per_second:,.1f} tok/s" if p.tokens_per_second is not None else ""
        click.echo(f"\r[{'#' * filled}{'.' * (30 - filled)}] {p.fraction:5.1%} "
                   f"{p.requests_done}/{p.requests_total} {rate:<16}", err=True, nl=p.finished)

    return show


def _progress_lines(p: BenchProgress) -> None:
    click.echo(json.dumps({"event": "progress", **dataclasses.asdict(p)}), err=True)


def _print_run(record: RunRecord, as_json: bool) -> None:
    if as_json:
        click.echo(record.model_dump_json(indent=2))
        return
    click.echo(to_markdown(tables_of(record)), nl=False)


def _raise_unless_complete(record: RunRecord, json_lines: bool = False) -> None:
    for warning in record.details.warnings:
        if json_lines:  # beside the progress lines, in their form
            click.echo(json.dumps({"event": "warning", "message": warning}), err=True)
        else:
            click.echo(f"sparksync: warning: {warning}", err=True)
    if record.status == "complete":
        return
    where = f"stored as run {record.id} ({record.status})"
    if record.error and record.error.startswith("cancelled"):
        raise BenchCancelledError(f"benchmark {record.error}; {where}")
    raise BenchRunFailedError(f"{record.error}; {where}")


def _emit(subject, fmt: str, output: Path | None, default_name: str) -> None:
    if fmt == "png":
        path = export_file(subject, "png", output or Path(f"{default_name}.png"))
        click.echo(f"wrote {path}")
    elif output is not None:
        click.echo(f"wrote {export_file(subject, fmt, output)}")
    else:
        click.echo(export_text(subject, fmt), nl=False)


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:,.2f}"
