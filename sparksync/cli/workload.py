"""``sparksync workload ...``: start a recipe on nodes, list, watch, stop and read logs.

    sparksync workload start llamacpp-single --nodes local --model ~/models/tiny.gguf   # this computer
    sparksync workload start llamacpp-single --nodes spark-1 --model /models/qwen.gguf
    sparksync workload start llamacpp-rpc --nodes spark-1,spark-2,spark-3,spark-4 --model /models/big.gguf
    sparksync workload start torchrun --nodes spark-1,spark-2 --set training.script=/opt/train.py
    sparksync workload list [--json]
    sparksync workload logs ID [--rank N] [--follow]
    sparksync workload watch ID            # stops the rest when one rank fails
    sparksync workload stop ID
    sparksync workload baseline show       # one-node training baselines, for scaling efficiency
    sparksync workload baseline set torchrun@3fa2c19b 8737

``--nodes`` takes paired nodes' names and this computer, as ``local`` or
``"this computer"``. Progress goes to stderr; the result (workload id and
ranks) to stdout. Ctrl-C while starting stops what was started. Every
command is options plus output around the core's ``WorkloadControl``, the
one the desktop app uses.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
import webbrowser
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from sparksync_agent.protocol import LogLine, RankStatus

from sparksync.core.agents import LogGap
from sparksync.core.fleet import Fleet
from sparksync.core.models import CopyEvent
from sparksync.core.nodes import NodeNames
from sparksync.core.workloads import (
    DEFAULT_STOP_GRACE_S,
    BaselineStore,
    GroupScaling,
    Progress,
    WorkloadControl,
    WorkloadError,
    WorkloadStore,
    TunnelReach,
    WorkloadView,
    open_workload,
    parse_settings,
    resolve,
)

SCALING_EVERY_S = 10.0


@click.group()
def workload() -> None:
    """Inference and training workloads on the paired nodes and this computer."""


@contextmanager
def _control() -> Iterator[WorkloadControl]:
    """The core's workload service over a fleet that lives as long as the command."""
    with Fleet() as fleet:
        yield WorkloadControl(lambda: fleet)


def _progress(event: Progress) -> None:
    click.echo(f"{event.event:>8}  {event.message}", err=True)


def _copy_progress(event: CopyEvent) -> None:
    if event.phase in ("waiting", "copying") and event.bytes_done and event.bytes_done < event.bytes_total:
        return  # the ends of each copy, not every tick, on a launch's progress lines
    done = f"{event.bytes_done / 1e6:.1f}/{event.bytes_total / 1e6:.1f} MB" if event.bytes_total else ""
    rate = f" {event.rate_bps / 1e9:.3f} GB/s" if event.rate_bps else ""
    click.echo(f"{'model':>8}  {event.node}: {event.phase} {done}{rate}" + (f" ({event.message})" if event.message else ""),
               err=True)  # fmt: skip


@workload.command("start")
@click.argument("recipe")
@click.option("--nodes", help="Comma-separated node names, in rank order (the first is the head); "
              "'local' is this computer.")
@click.option("--plan", "plan_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A placement plan (JSON: groups of nodes per recipe) instead of --nodes.")  # fmt: skip
@click.option("--model", help="The model: for llama.cpp a .gguf path ON the head node.")
@click.option("--served-name", help="The model name clients ask for.")
@click.option("--http-port", type=click.IntRange(1, 65535), help="The engine's HTTP port on the head.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="Any recipe field, e.g. llamacpp.threads=2 or training.script=/opt/train.py.")  # fmt: skip
@click.option("--copy-model", is_flag=True,
              help="Copy a store model (--model NAME) to the nodes that lack it first, verified.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the started workload as JSON.")
def start(recipe: str, nodes: str | None, plan_file: Path | None, model: str | None, served_name: str | None,
          http_port: int | None, settings: tuple[str, ...], copy_model: bool, as_json: bool) -> None:  # fmt: skip
    """Start RECIPE on the nodes: every rank through its node's agent, stage by stage, all or nothing."""
    overrides: dict[str, Any] = parse_settings(settings)
    overrides.update({k: v for k, v in {"model": model, "served_name": served_name}.items() if v})
    if http_port:
        overrides.setdefault("ports", {})["http"] = http_port
    names = [n.strip() for n in (nodes or "").split(",") if n.strip()]
    plan, recipes = resolve(recipe, names, plan_file, overrides)

    def warn(prepared) -> None:
        for warning in prepared.warnings:
            click.echo(f"sparksync: warning: {warning}", err=True)

    with _control() as control:
        result = control.start_plan(plan, recipes, _progress, on_prepared=warn, copy_model=copy_model,
                                    on_copy=_copy_progress)  # fmt: skip
    _print_view(result, as_json)


@workload.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option("--all", "show_all", is_flag=True,
              help="Also the workloads failed or gone for more than an hour (left out by default).")
def list_(as_json: bool, show_all: bool) -> None:
    """The workloads started from this computer, as their nodes report them now.

    An ended workload shows the last tokens/s its nodes recorded. Failed and gone workloads
    leave this list an hour after they ended (see --all); `workload prune` drops them.
    """
    records = WorkloadStore().list()
    if not records:  # nothing to ask the nodes about
        click.echo(json.dumps({"workloads": []}) if as_json else "no workloads (start one with "
                   "`sparksync workload start RECIPE --nodes ...`)")  # fmt: skip
        return
    with _control() as control:
        found = control.rows()  # an ended one-node training run becomes its setup's baseline
    hidden = [] if show_all else [r for r in found if r.stale]
    found = [r for r in found if r not in hidden]
    if as_json:
        docs = [_view_json(r.view) | {"decode_tps": r.decode_tps, "prefill_tps": r.prefill_tps,
                                      "last_decode_tps": r.last.decode_tps if r.last else None,
                                      "last_tokens_at": r.last.at if r.last else None,
                                      "scaling": [g.as_json() for g in r.scaling]}
                for r in found]  # fmt: skip
        click.echo(json.dumps({"workloads": docs, "hidden": [r.view.workload_id for r in hidden]}, indent=2))
        return
    rows = [("ID", "STATE", "NODES", "TOK/S", "SCALING")] + [
        (r.view.workload_id, r.view.state, ",".join(r.view.record.nodes()), _row_rate(r), _scaling(r.scaling))
        for r in found
    ]
    click.echo(_table(rows))
    if hidden:
        click.echo(f"({len(hidden)} failed or gone for more than an hour not shown: `sparksync workload list "
                   "--all`; `sparksync workload prune` drops them)")


@workload.command("open")
@click.argument("name")
@click.option("--browser", is_flag=True, help="Also open the browser at the engine's /v1/models.")
def open_(name: str, browser: bool) -> None:
    """Reach workload NAME's HTTP API from here until Ctrl-C: a tunnel to its head node's port.

    NAME is a workload id, a recipe name (every replica started from it) or a group. Prints
    each endpoint's local URL (an OpenAI-compatible base URL ends in /v1).
    """
    records = WorkloadStore().list()
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with Fleet() as fleet, open_workload(TunnelReach(fleet), records, name) as opened:
            for endpoint, url in opened:
                click.echo(f"{endpoint.group} on {endpoint.node}: {url}/v1  (Ctrl-C closes it)")
                if browser:
                    webbrowser.open(f"{url}/v1/models")
            sys.stdout.flush()
            try:
                stop.wait()
            except KeyboardInterrupt:
                pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    click.echo(f"closed {name}", err=True)


@workload.command("prune")
@click.option("--ended", is_flag=True, help="Also the stopped and exited ones, not only failed and gone.")
def prune(ended: bool) -> None:
    """Drop failed and gone workloads from the list and from their nodes (with their logs)."""
    states = ("failed", "gone", "stopped", "exited") if ended else ("failed", "gone")
    with _control() as control:
        dropped = control.prune(states)
    click.echo("\n".join(f"dropped {w}" for w in dropped) or f"no {' or '.join(states)} workloads to drop")


def _row_rate(row) -> str:
    return row.tokens_text()


@workload.command("stop")
@click.argument("workload_id")
@click.option("--grace", type=click.FloatRange(0, 600), default=DEFAULT_STOP_GRACE_S, show_default=True,
              help="Seconds between SIGTERM and SIGKILL.")  # fmt: skip
@click.option("--keep", is_flag=True, help="Keep it listed (and its logs on the nodes) after stopping.")
def stop(workload_id: str, grace: float, keep: bool) -> None:
    """Stop every process of the workload on every node."""
    record = WorkloadStore().get(workload_id)  # an unknown id is refused before any node is asked
    with _control() as control:
        baselines = control.stop(workload_id, grace) if keep else control.remove(workload_id, grace)
    for baseline in baselines:
        click.echo(f"one-node baseline {baseline.key}: {baseline.tokens_per_s:,.1f} tok/s", err=True)
    click.echo(f"stopped {workload_id} on {', '.join(record.nodes())}")


@workload.command("logs")
@click.argument("workload_id")
@click.option("--rank", type=int, help="Only this rank (0 is the head).")
@click.option("--group", help="Only this group (replica), e.g. llamacpp-rpc-1.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until the process ends.")
@click.option("--lines", "-n", type=click.IntRange(min=1), default=200, show_default=True,
              help="How many of the last lines to print first.")  # fmt: skip
def logs(workload_id: str, rank: int | None, group: str | None, follow: bool, lines: int) -> None:
    """A workload's output, per process (prefixed by its name when there are several)."""
    with _control() as control:
        chosen = control.ranks(workload_id, rank, group)
        if follow and len(chosen) > 1:
            names = ", ".join(r.name for r in chosen)
            raise WorkloadError(f"--follow reads one process; pick it with --rank/--group (it has: {names}).")
        for ref in chosen:
            page = control.log_page(workload_id, ref)
            prefix = f"[{ref.name}] " if len(chosen) > 1 else ""
            for line in page.lines[-lines:]:
                click.echo(prefix + line.text)
            if follow:
                _follow(control, workload_id, ref, page.last_seq)


def _follow(control: WorkloadControl, workload_id: str, ref, since: int) -> None:
    for item in control.follow(workload_id, ref, since):
        if isinstance(item, LogLine):
            click.echo(item.text)
        elif isinstance(item, LogGap):
            click.echo(f"sparksync: warning: {item.lost} line(s) were no longer held by the agent", err=True)
        elif isinstance(item, RankStatus):
            click.echo(
                f"sparksync: {ref.name} ended: {item.state.value} {item.message or ''}".rstrip(), err=True
            )


@workload.command("watch")
@click.argument("workload_id")
@click.option("--interval", type=click.FloatRange(0.1, 60), default=1.0, show_default=True)
@click.option("--scaling-every", type=click.FloatRange(1, 3600), default=SCALING_EVERY_S, show_default=True,
              help="Seconds between training scaling lines (tokens/s and efficiency).")  # fmt: skip
def watch(workload_id: str, interval: float, scaling_every: float) -> None:
    """Follow the ranks' states until the workload ends; when one rank fails, stop the others.

    Training workloads also print their tokens/s and scaling efficiency against the one-node baseline.
    """
    WorkloadStore().get(workload_id)  # an unknown id is refused before any node is asked
    seen: dict[str, str] = {}
    said = {"at": float("-inf")}

    def on_view(current: WorkloadView) -> None:
        for rank in current.ranks:
            if seen.get(rank.ref.name) != rank.state:
                seen[rank.ref.name] = rank.state
                why = f" ({rank.why()})" if rank.state in ("failed", "lost", "unreachable") else ""
                click.echo(f"{rank.ref.name} on {rank.ref.node}: {rank.state}{why}")
        if current.live() and time.monotonic() - said["at"] >= scaling_every:
            for group in control.scaling(current, control.tokens(workload_id)):
                said["at"] = time.monotonic()
                click.echo(f"{group.group} on {group.nodes} node(s): {_rate(group.tokens_per_s)} tok/s, "
                           f"scaling {group.describe()}")  # fmt: skip

    with _control() as control:
        final = control.watch(workload_id, threading.Event(), on_view, interval)
        for baseline in control.record_baselines(final):
            click.echo(f"one-node baseline {baseline.key}: {baseline.tokens_per_s:,.1f} tok/s "
                       f"(median of {baseline.samples} figures)")  # fmt: skip
    click.echo(f"workload {workload_id}: {final.state}")
    if final.state == "failed":
        raise SystemExit(9)


@workload.group("baseline")
def baseline() -> None:
    """One-node training baselines, against which training on N nodes shows its scaling efficiency.

    A one-node training run records its setup's baseline by itself when it ends or is stopped.
    """


@baseline.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def baseline_show(as_json: bool) -> None:
    """Every stored baseline: key, tokens/s, where it came from, and the setup the key stands for."""
    found = BaselineStore().list()
    if as_json:
        click.echo(json.dumps({"baselines": [b.model_dump(mode="json") for b in found]}, indent=2))
        return
    if not found:
        click.echo("no one-node baselines yet: run a training workload on one node, or "
                   "`sparksync workload baseline set KEY TOK/S` (keys are in `sparksync workload list`)")  # fmt: skip
        return
    rows = [("KEY", "TOK/S", "SOURCE", "RECORDED (UTC)", "SETUP")] + [
        (b.key, _rate(b.tokens_per_s), b.source if b.workload_id is None else f"{b.source} ({b.workload_id})",
         time.strftime("%Y-%m-%d %H:%M", time.gmtime(b.recorded_at)), b.setup or "-")
        for b in found
    ]  # fmt: skip
    click.echo(_table(rows))


@baseline.command("set")
@click.argument("key")
@click.argument("tokens_per_s", metavar="TOK/S", type=float)
def baseline_set(key: str, tokens_per_s: float) -> None:
    """Set KEY's one-node tokens/s by hand (e.g. measured elsewhere); the newest figure wins."""
    stored = BaselineStore().set(key, tokens_per_s)
    click.echo(f"one-node baseline {stored.key}: {stored.tokens_per_s:,.1f} tok/s")


# --- output -----------------------------------------------------------------------------


def _scaling(groups: list[GroupScaling]) -> str:
    if not groups:
        return "-"
    return "; ".join(g.describe() if len(groups) == 1 else f"{g.group}: {g.describe()}" for g in groups)


def _view_json(view: WorkloadView) -> dict[str, Any]:
    return {
        "workload_id": view.workload_id,
        "state": view.state,
        "nodes": view.record.nodes(),
        "node_ids": view.record.with_current_names(NodeNames.current()).node_ids,  # a new record has none yet
        "recipes": view.record.recipes,
        "endpoints": [e.model_dump() for e in view.record.endpoints],
        "ranks": [
            {
                **r.ref.model_dump(),
                "state": r.state,
                "problem": r.problem,
                "status": r.status.model_dump(mode="json") if r.status else None,
            }
            for r in view.ranks
        ],
    }


def _print_view(view: WorkloadView, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(_view_json(view), indent=2))
        return
    click.echo(f"workload {view.workload_id}: {view.state}")
    rows = [("PROCESS", "NODE", "STATE", "PID")] + [
        (r.ref.name, r.ref.node, r.state, str(r.status.pid if r.status and r.status.pid else "-"))
        for r in view.ranks
    ]
    click.echo(_table(rows))
    for endpoint in view.record.endpoints:
        click.echo(f"{endpoint.group}: http://{endpoint.host}:{endpoint.port} on {endpoint.node}")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _table(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)
