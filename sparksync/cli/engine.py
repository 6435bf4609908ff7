"""``sparksync engine ...``: which engines each node can run, and installing llama.cpp on one.

    sparksync engine list [NODE]... [--json] [--refresh]
    sparksync engine install llama.cpp [--node NAME]... [--flavour auto|cpu|cuda] [--jobs N]

Nodes are the paired ones and this computer (``local``). ``list`` asks each
node's agent (GET /v1/engines) what it found and why the rest is missing.
``install`` builds llama-server and rpc-server on the node itself, CUDA
where nvcc exists (see ``core.workloads.engine_install``); it takes
minutes. On this computer the build goes into the engine cache, where its
local agent looks, so recipes find ``llama-server`` by name.
"""

from __future__ import annotations

import json
from typing import Any

import click
from sparksync_agent.protocol import EngineReport

from sparksync.core.base import SparkSyncError
from sparksync.core.fleet import Fleet
from sparksync.core.workloads import FLAVOURS, InstallProgress, WorkloadControl

INSTALLABLE = ("llama.cpp",)


@click.group()
def engine() -> None:
    """Inference and training engines on the nodes."""


@engine.command("list")
@click.argument("names", nargs=-1, metavar="[NODE]...")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option("--refresh", is_flag=True, help="Make the agents check again now.")
@click.pass_context
def list_(ctx: click.Context, names: tuple[str, ...], as_json: bool, refresh: bool) -> None:
    """Per node (this computer too): the engines present, and what the missing ones lack."""
    with Fleet() as fleet:
        nodes = fleet.names(names or None)
        answers = WorkloadControl(lambda: fleet).engines(nodes, refresh)
    if as_json:
        click.echo(json.dumps({"nodes": [_node_json(n, answers[n]) for n in nodes]}, indent=2))
    else:
        for node in nodes:
            click.echo(_node_text(node, answers[node]))
    failed = [a for a in answers.values() if isinstance(a, SparkSyncError)]
    if failed:
        ctx.exit(failed[0].exit_code)


def _node_json(node: str, answer: object) -> dict[str, Any]:
    if isinstance(answer, SparkSyncError):
        return {"name": node, "error": str(answer), "engines": None}
    assert isinstance(answer, EngineReport)
    return {"name": node, "error": None, **answer.model_dump(mode="json")}


def _node_text(node: str, answer: object) -> str:
    if isinstance(answer, SparkSyncError):
        return f"{node}: cannot ask its agent: {answer}"
    assert isinstance(answer, EngineReport)
    lines = [f"{node}:"]
    paths = {c.name: c for c in answer.checks if c.available}
    for name, ok in sorted(answer.engines.items()):
        if ok:
            found = paths.get("llama-server" if name == "llama.cpp" else name)
            detail = (
                f"  ({found.path}{', ' + found.version if found and found.version else ''})" if found else ""
            )
            lines.append(f"  {name:<14} present{detail}")
        else:
            lines.append(f"  {name:<14} missing: needs {' or '.join(answer.missing.get(name, []))}")
    why = [f"    {c.name}: {c.missing}" for c in answer.checks if not c.available and c.missing]
    return "\n".join(lines + (["  not found:"] + why if why else []))


@engine.command("install")
@click.argument("name", type=click.Choice(INSTALLABLE))
@click.option(
    "--node", "nodes", multiple=True,
    help="The node (repeat for several; 'local' is this computer); default: every paired node, "
    "or this computer when none is paired.",
)  # fmt: skip
@click.option("--flavour", type=click.Choice(FLAVOURS), default="auto", show_default=True,
              help="auto: CUDA where nvcc and the NVIDIA driver exist, else CPU.")  # fmt: skip
@click.option("--jobs", type=click.IntRange(min=1), help="Parallel compile jobs (default: the node's cores).")
def install(name: str, nodes: tuple[str, ...], flavour: str, jobs: int | None) -> None:
    """Build NAME on the node(s) from the pinned source; minutes per node."""
    with Fleet() as fleet:
        targets = fleet.names(nodes) if nodes else fleet.cluster()
        control = WorkloadControl(lambda: fleet)
        for node in targets:
            click.echo(f"{node}: building llama.cpp ({flavour})", err=True)
            where = control.install_engine(node, _printer(node), flavour, jobs)
            click.echo(f"{node}: llama.cpp installed in {where}")


def _printer(node: str):
    last: dict[str, Any] = {"step": None, "percent": -10.0}

    def show(progress: InstallProgress) -> None:
        if progress.step != last["step"]:
            last["step"], last["percent"] = progress.step, -10.0
            click.echo(f"{node}: {progress.step}", err=True)
        if progress.percent is not None and progress.percent >= last["percent"] + 5:
            last["percent"] = progress.percent
            click.echo(f"{node}: {progress.step} {progress.percent:.0f}%", err=True)

    return show
