"""``sparksync bench ...``: run llama-benchy like the published figures, and keep the history.

    sparksync bench run --endpoint http://127.0.0.1:8080 --model qwen --tokenizer ~/qwen/tokenizer.json
    sparksync bench run ... --pp 512 --pp 2048 --tg 128 --runs 5       # a custom profile
    sparksync bench list
    sparksync bench show 12
    sparksync bench compare 12 15 --format md
    sparksync bench export 12 --format png --output run12.png
    sparksync bench report 3 4 5 6 --format md                        # scaling across cluster sizes
    sparksync bench report --sweep 0f3a9c1d2e4b

``run --json`` prints the stored run (the RunRecord model, llama-benchy's
JSON in ``result``). A run that did not complete is stored all the same
(partial or failed) and the command exits non-zero: 130 when cancelled
(Ctrl-C), 36 when the benchmark failed, 30-35 when the input was refused.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from sparksync.core.bench.benchy import API_KEY_ENV
from sparksync.core.bench.context import MAX_CLUSTER_SIZE, RunContext
from sparksync.core.bench.endpoint import Endpoint
from sparksync.core.bench.errors import BenchCancelledError, BenchInputError, BenchRunFailedError
from sparksync.core.bench.exports import FORMATS, export_file, export_text, tables_of, to_markdown
from sparksync.core.bench.history import HistoryStore
from sparksync.core.bench.profile import PUBLISHED, BenchProfile
from sparksync.core.bench.progress import BenchProgress
from sparksync.core.bench.prompt_source import DEFAULT_PROMPT_FILE
from sparksync.core.bench.record import RunRecord
from sparksync.core.bench.recording import inference_record, store
from sparksync.core.bench.report import compare_runs, scaling_report
from sparksync.core.bench.runner import BenchRequest, BenchRunner

POSITIVE = click.IntRange(min=1)
_CUSTOM_OPTIONS = ("pp", "tg", "depth", "concurrency", "runs", "exact_tg", "no_warmup", "no_cache")


@click.group()
def bench() -> None:
    """Benchmarks like the published ones (llama-benchy), their history and scaling reports."""


@bench.command("run")
@click.option("--endpoint", required=True, help="The model's OpenAI endpoint, e.g. http://127.0.0.1:8080/v1.")
@click.option("--model", required=True, help="The served model name (as /v1/models lists it).")
@click.option("--tokenizer", required=True, type=click.Path(path_type=Path),
              help="The model's own tokenizer.json (or its folder); never fetched from a hub.")
@click.option("--api-key", envvar=API_KEY_ENV, help=f"The endpoint's API key (or ${API_KEY_ENV}).")
@click.option("--profile", "profile_name", type=click.Choice(["published", "custom"]),
              help="published (default): concurrency 1, pp 8192, tg 256, llama-benchy's runs and warmup.")
@click.option("--pp", type=POSITIVE, multiple=True, help="Prompt tokens; repeat for several.")
@click.option("--tg", type=POSITIVE, multiple=True, help="Generated tokens; repeat for several.")
@click.option("--depth", type=click.IntRange(min=0), multiple=True, help="Context depth; repeat for several.")
@click.option("--concurrency", type=POSITIVE, multiple=True, help="Requests at once; repeat for several.")
@click.option("--runs", type=POSITIVE, help="Runs per test (llama-benchy's default: 3).")
@click.option("--exact-tg", is_flag=True, help="Ask for exactly tg tokens (ignore end of text).")
@click.option("--no-warmup", is_flag=True, help="Skip llama-benchy's warmup request.")
@click.option("--no-cache", is_flag=True, help="Defeat the server's prompt cache.")
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
@click.option("--json", "as_json", is_flag=True, help="Print the stored run as JSON.")
def run_cmd(endpoint: str, model: str, tokenizer: Path, api_key: str | None, profile_name: str | None,
            prompt_file: Path, as_json: bool, **options) -> None:
    """Run llama-benchy against ENDPOINT and store the result in the history."""
    profile = _profile(profile_name, {k: options.pop(k) for k in _CUSTOM_OPTIONS})
    request = BenchRequest(Endpoint.parse(endpoint, api_key), model, tokenizer, profile,
                           prompt_file=prompt_file, context=_context(options))
    history = HistoryStore()
    if not as_json:
        click.echo(f"benchmarking {model} at {request.endpoint.base_url} ({profile.describe()})", err=True)
    outcome = BenchRunner(request, on_progress=_progress_printer()).run()
    record = store(history, _with_engine_version(inference_record(request, outcome), outcome))
    _print_run(record, as_json)
    _raise_unless_complete(record)


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
    click.echo(f"{'id':>5}  {'when (UTC)':<16}  {'status':<8}  {'nodes':>5}  {'decode':>9}  {'prefill':>10}  "
               f"{'TTFT ms':>8}  model")
    for i in items:
        decode = i.train_tps if i.kind == "training" else i.decode_tps
        click.echo(f"{i.id:>5}  {i.created_at:%Y-%m-%d %H:%M}  {i.status:<8}  {i.cluster_size:>5}  "
                   f"{_num(decode):>9}  {_num(i.prefill_tps):>10}  {_num(i.ttft_ms):>8}  {i.model}"
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


# --- helpers ---


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


def _with_engine_version(record: RunRecord, outcome) -> RunRecord:
    """Fill the engine's version from the server (llama.cpp's build) when the user gave none."""
    server = outcome.preflight.facts
    ctx = record.context
    updates = {}
    if ctx.engine_version is None and server.build_info:
        updates["engine_version"] = server.build_info
    if ctx.engine is None and server.owned_by:
        updates["engine"] = server.owned_by
    return record.model_copy(update={"context": ctx.model_copy(update=updates)}) if updates else record


def _progress_printer():
    """A one-line progress bar on an interactive stderr; nothing when stderr is a file or pipe."""
    if not sys.stderr.isatty():
        return None

    def show(p: BenchProgress) -> None:
        filled = int(p.fraction * 30)
        rate = f"{p.tokens_per_second:,.1f} tok/s" if p.tokens_per_second is not None else ""
        click.echo(f"\r[{'#' * filled}{'.' * (30 - filled)}] {p.fraction:5.1%} "
                   f"{p.requests_done}/{p.requests_total} {rate:<16}", err=True, nl=p.finished)

    return show


def _print_run(record: RunRecord, as_json: bool) -> None:
    if as_json:
        click.echo(record.model_dump_json(indent=2))
        return
    click.echo(to_markdown(tables_of(record)), nl=False)


def _raise_unless_complete(record: RunRecord) -> None:
    for warning in record.details.warnings:
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
