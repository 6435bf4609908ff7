"""``sparksync cluster ...``: form the cluster's CX-7 fabric.

    sparksync cluster detect   [--node NAME]... [--json] [--expected-speed MBPS]
    sparksync cluster plan     [--node NAME]... [--json] [--base 10.100.0.0/16] [--prefix 24]
    sparksync cluster apply    [--json] [--sudo-password-stdin]
    sparksync cluster rollback [--json] [--sudo-password-stdin]

``detect`` reads every paired node's ports through its agent and prints the
cabling and its topology (direct, ring, switch, or mixed with each problem).
``plan`` detects, plans the addresses and stores the plan with the cluster,
changing nothing. ``apply`` applies the stored plan on every node at once,
all or nothing, through each node's root helper (sudo asks for the user's
password once; it is used for the nodes' sudo and forgotten). ``rollback``
puts every node's fabric back as it was before SparkSync.

Per-node progress goes to stderr, the result to stdout (``--json``: one JSON
document). Other ``cluster`` subcommands add themselves to this group.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from sparksync.core.fabric import (
    CX7_SPEED_MBPS,
    DEFAULT_BASE,
    DEFAULT_PREFIX,
    ApplyReport,
    Detection,
    FabricOperations,
    FabricPlan,
    FabricProgress,
    FabricSetupError,
    FabricStore,
    PlanState,
    make_plan,
)
from sparksync.core.fleet import Fleet


@click.group()
def cluster() -> None:
    """Form the cluster: its CX-7 fabric (detect, plan, apply, rollback)."""


def _node_option(f):
    return click.option("--node", "nodes", multiple=True, metavar="NAME",
                        help="Only these nodes (default: every paired node).")(f)


def _json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(f)


def _speed_option(f):
    return click.option("--expected-speed", "expected_speed", type=int, default=CX7_SPEED_MBPS, show_default=True,
                        metavar="MBPS", help="A link below this speed is named as a problem (0: no check).")(f)


def _password_option(f):
    return click.option("--sudo-password-stdin", "password_stdin", is_flag=True,
                        help="Read the nodes' sudo password from the first line of stdin.")(f)


@cluster.command()
@_node_option
@_json_option
@_speed_option
def detect(nodes: tuple[str, ...], as_json: bool, expected_speed: int) -> None:
    """Each node's CX-7 ports, the cabling between them and its topology."""
    with Fleet() as fleet:
        found = _detect(fleet, nodes, expected_speed, as_json)
    if as_json:
        click.echo(json.dumps(detection_json(found), indent=2))
    else:
        click.echo(detection_text(found))


@cluster.command("plan")
@_node_option
@_json_option
@_speed_option
@click.option("--base", default=DEFAULT_BASE, show_default=True, help="The address range subnets are taken from.")
@click.option("--prefix", default=DEFAULT_PREFIX, show_default=True, help="The length of each subnet.")
def plan_(nodes: tuple[str, ...], as_json: bool, expected_speed: int, base: str, prefix: int) -> None:
    """Plan the fabric's addresses from the detected cabling and store the plan (nothing changes yet)."""
    with Fleet() as fleet:
        found = _detect(fleet, nodes, expected_speed, as_json)
    plan = make_plan(found.topology, found.reports, base=base, prefix=prefix)
    path = FabricStore().save_plan(plan)
    if as_json:
        click.echo(json.dumps({"plan": plan.model_dump(mode="json"), "stored": str(path)}, indent=2))
    else:
        click.echo(plan_text(plan))
        click.echo(f"\nStored in {path}. Apply it with 'sparksync cluster apply'.")


@cluster.command()
@_json_option
@_password_option
@click.pass_context
def apply(ctx: click.Context, as_json: bool, password_stdin: bool) -> None:
    """Apply the stored plan on every node, all or nothing."""
    store = FabricStore()
    plan = store.load().plan
    if plan is None:
        raise FabricSetupError("no fabric plan is stored: run 'sparksync cluster plan' first")
    password = _sudo_password(password_stdin)
    with Fleet() as fleet:
        report = FabricOperations(fleet, _progress(as_json)).apply(plan, password)
    del password
    if report.ok:
        store.set_state(PlanState.applied)
    _print_report(report, as_json)
    if not report.ok:
        ctx.exit(1)


@cluster.command()
@_node_option
@_json_option
@_password_option
@click.pass_context
def rollback(ctx: click.Context, nodes: tuple[str, ...], as_json: bool, password_stdin: bool) -> None:
    """Put every node's fabric back as it was before SparkSync applied a plan."""
    store = FabricStore()
    stored = store.load()
    plan = stored.applied or stored.plan  # the nodes that carry a plan, else the ones last planned
    password = _sudo_password(password_stdin)
    with Fleet() as fleet:
        names = list(nodes) or ([p.name for p in plan.nodes.values()] if plan else [n.name for n in fleet.nodes()])
        report = FabricOperations(fleet, _progress(as_json)).rollback(names, password, plan.plan_id if plan else None)
    del password
    if report.ok and plan is not None and not nodes:
        store.set_state(PlanState.rolled_back)
    _print_report(report, as_json)
    if not report.ok:
        ctx.exit(1)


# --- shared with the other cluster commands ------------------------------------------------------


def cluster_nodes(fleet: Fleet, nodes: tuple[str, ...]) -> list[str]:
    """The named nodes, or every paired one (this computer is not part of the fabric)."""
    names = [n.name for n in fleet.nodes(nodes or None)]
    if len(names) < 2:
        raise FabricSetupError(
            f"a fabric needs two paired nodes or more; {'only ' + names[0] + ' is' if names else 'none is'} paired"
        )
    return names


def _detect(fleet: Fleet, nodes: tuple[str, ...], expected_speed: int, quiet: bool) -> Detection:
    names = cluster_nodes(fleet, nodes)
    return FabricOperations(fleet, _progress(quiet)).detect(names, expected_speed or None)


def _progress(quiet: bool):
    def show(progress: FabricProgress) -> None:
        mark = {None: "..", True: "ok", False: "FAILED"}[progress.ok]
        if progress.ok is None and quiet:
            return
        click.echo(f"{progress.node}: {progress.stage} {mark}"
                   + ("" if progress.ok is None else f": {progress.message}"), err=True)

    return show


def _sudo_password(from_stdin: bool) -> str:
    if from_stdin:
        line = sys.stdin.readline().rstrip("\n")
        if not line:
            raise click.UsageError("--sudo-password-stdin: standard input was empty; write the password to it.")
        return line
    if not sys.stdin.isatty():
        raise click.UsageError("No terminal to ask for the sudo password on: pass it with --sudo-password-stdin.")
    return click.prompt("sudo password on the nodes (used once, never stored)", hide_input=True, err=True)


def _print_report(report: ApplyReport, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
        return
    click.echo(report.summary() + f" ({report.elapsed_s:.1f} s)")


# --- text and JSON ---------------------------------------------------------------------------------


def detection_json(found: Detection) -> dict[str, Any]:
    top = found.topology
    return {
        "kind": top.kind.value,
        "plannable": top.plannable,
        "elapsed_s": round(found.elapsed_s, 3),
        "nodes": {name: report.model_dump(mode="json") for name, report in found.reports.items()},
        "segments": [
            {"key": s.key, "kind": "cable" if s.is_cable else "switch",
             "ends": [{"node": e.node, "port": e.port, "speed_mbps": top.graph.ports[e].speed_mbps} for e in s.ends]}
            for s in top.graph.segments
        ],
        "problems": [p.as_dict() for p in top.problems],
    }  # fmt: skip


def detection_text(found: Detection) -> str:
    top = found.topology
    kind = "mixed or broken" if top.kind.value == "mixed" else top.kind.value
    lines = [f"Fabric: {kind}, {len(found.reports)} nodes (detected in {found.elapsed_s:.1f} s)"]
    for segment in top.graph.segments:
        speeds = sorted({top.graph.ports[e].speed_mbps for e in segment.ends} - {None})
        speed = "/".join(f"{s / 1000:g}G" for s in speeds) or "?"
        lines.append(f"  {segment.label}  [{speed}]")
    for problem in top.problems:
        lines.append(f"  {problem.severity.value}: {problem.message}")
    if not top.plannable:
        lines.append("Not plannable as it is: fix the errors above and detect again.")
    return "\n".join(lines)


def plan_text(plan: FabricPlan) -> str:
    lines = [f"Plan {plan.plan_id}: {plan.topology.value}, MTU {plan.mtu}, from {plan.base}"]
    for node in plan.nodes.values():
        lines.append(f"  {node.name}:")
        lines += [f"    {i.name:<14} {i.address:<18} MTU {i.mtu}" for i in node.interfaces]
        lines += [f"    {key}={value}" for key, value in node.env.items()]
    lines += [f"warning: {w}" for w in plan.warnings]
    return "\n".join(lines)
