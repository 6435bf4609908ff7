"""``sparksync cluster mesh | mesh check | check``: node-to-node SSH and the fabric's acceptance test.

    sparksync cluster mesh        [--json]   each node its own key; peers' keys (from= the fabric) and
                                             pinned host keys on every node; all or nothing
    sparksync cluster mesh check  [--json]   every ordered pair: ssh over the fabric, StrictHostKeyChecking=yes
    sparksync cluster check       [--json] [--seconds S] [--streams N] [--line-rate GBPS] [--no-rdma] [--no-nccl]
    sparksync cluster check --list [--json]  the stored checks, newest first

All work on the applied fabric plan (``sparksync cluster apply``). Per-node
progress goes to stderr, the result to stdout. ``check`` stores every result
in the history and exits 1 when a link failed or was flagged.
"""

from __future__ import annotations

import json
from typing import Any

import click

from sparksync.core.bench import HistoryStore
from sparksync.core.fabric import FabricSetupError, FabricStore
from sparksync.core.fabric import CheckOptions, CheckProgress, run_check
from sparksync.core.fabric import FabricCheckHistory
from sparksync.core.fabric import FabricCheckReport, Verdict
from sparksync.core.fabric import CX7_LINE_RATE_MBPS, FabricLinks, links_from_plan
from sparksync.core.fabric import MeshCheckReport, MeshProgress, check_mesh, plan_mesh, setup_mesh
from sparksync.core.fabric import FleetShell
from sparksync.core.fleet import Fleet
from sparksync.core.nodes import Registry


def add_mesh_commands(cluster: click.Group) -> None:
    cluster.add_command(mesh)
    cluster.add_command(check)


def applied_links(line_rate_mbps: int = CX7_LINE_RATE_MBPS) -> tuple[FabricLinks, str]:
    """The applied plan's links (each end by its node's name now) and the plan's topology."""
    stored = FabricStore().load()
    if stored.plan is None:
        raise FabricSetupError("no fabric plan is stored: run 'sparksync cluster plan' and 'apply' first")
    if stored.applied is None:
        raise FabricSetupError(f"the stored fabric plan is {stored.state.value}, not applied: "
                               "run 'sparksync cluster apply' first")
    registry = Registry()
    ids = {node.node_id: node.name for node in registry.list()}
    return links_from_plan(stored.applied, ids.get, line_rate_mbps), stored.applied.topology.value


def _json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(f)


def _progress(quiet: bool):
    """Per-node lines on stderr for a mesh or a check; with --json only what ended."""

    def show(event: MeshProgress | CheckProgress) -> None:
        if event.state == "running" and quiet:
            return
        mark = {"running": "..", "done": "ok", "failed": "FAILED"}[event.state]
        click.echo(f"{event.node}: {event.step} {mark}" + (f": {event.detail}" if event.detail else ""), err=True)

    return show


# --- mesh -------------------------------------------------------------------------------------------


@click.group(invoke_without_command=True)
@_json_option
@click.pass_context
def mesh(ctx: click.Context, as_json: bool) -> None:
    """Node-to-node SSH over the fabric (every node its own key, host keys from the pinned ones)."""
    if ctx.invoked_subcommand is not None:
        return
    links, _topology = applied_links()
    plan = plan_mesh(links)
    with Fleet() as fleet:
        result = setup_mesh(FleetShell(fleet), plan, _progress(as_json))
    if as_json:
        click.echo(json.dumps({"nodes": [m.name for m in plan.members], "keys": result.keys,
                               "created": result.created, "subnets": list(plan.subnets),
                               "stored": str(result.path)}, indent=2))
        return
    click.echo(f"Mesh set up on {len(plan.members)} nodes ({len(result.created)} new keys), from= "
               f"{', '.join(plan.subnets)}. Prove it with 'sparksync cluster mesh check'.")


@mesh.command("check")
@_json_option
@click.pass_context
def mesh_check(ctx: click.Context, as_json: bool) -> None:
    """Prove that every ordered pair can ssh over the fabric with StrictHostKeyChecking=yes."""
    links, _topology = applied_links()
    plan = plan_mesh(links)
    with Fleet() as fleet:
        report = check_mesh(FleetShell(fleet), plan, _progress(as_json))
    click.echo(json.dumps(mesh_json(report), indent=2) if as_json else mesh_text(report))
    if not report.ok:
        ctx.exit(1)


def mesh_json(report: MeshCheckReport) -> dict[str, Any]:
    return {"ok": report.ok, "checked": len(report.checked), "failed": len(report.failed),
            "pairs": [{"from": p.source, "to": p.target, "address": p.address, "ok": p.ok, "detail": p.detail}
                      for p in report.pairs]}


def mesh_text(report: MeshCheckReport) -> str:
    lines = [f"{'ok' if p.ok else 'FAILED'}  {p.source} -> {p.target} at {p.address}"
             + (f": {p.detail}" if p.detail and not p.ok else "") for p in report.checked]
    apart = [p for p in report.pairs if p.address is None]
    if apart:
        lines.append(f"{len(apart)} ordered pair(s) share no fabric link (a ring's non-neighbours); not checked.")
    verdict = "every pair reached" if report.ok else f"{len(report.failed)} of {len(report.checked)} failed"
    lines.append(f"Mesh check: {verdict} ({len(report.checked)} ssh logins over the fabric).")
    return "\n".join(lines)


# --- check ------------------------------------------------------------------------------------------


@click.command("check")
@_json_option
@click.option("--seconds", default=5.0, show_default=True, help="Length of each iperf3 and ib_write_bw run.")
@click.option("--streams", default=4, show_default=True, help="Parallel TCP streams per iperf3 run.")
@click.option("--line-rate", "line_rate", type=float, default=CX7_LINE_RATE_MBPS / 1000, show_default=True,
              metavar="GBPS", help="What each link should run at: the figures' 100 %.")
@click.option("--port", default=5201, show_default=True, help="The TCP port iperf3's server takes on the nodes.")
@click.option("--no-rdma", is_flag=True, help="Skip ib_write_bw.")
@click.option("--no-nccl", is_flag=True, help="Skip all_gather_perf.")
@click.option("--list", "list_", is_flag=True, help="List the stored checks instead of running one.")
@click.pass_context
def check(ctx: click.Context, as_json: bool, seconds: float, streams: int, line_rate: float, port: int,
          no_rdma: bool, no_nccl: bool, list_: bool) -> None:
    """The fabric's acceptance test, per link then for the cluster; every result goes into the history."""
    history = FabricCheckHistory(HistoryStore())
    if list_:
        rows = history.list()
        if as_json:
            click.echo(json.dumps([{**row.__dict__, "created_at": row.created_at.isoformat()} for row in rows],
                                  indent=2))
        else:
            for row in rows:
                tcp = "-" if row.min_tcp_gbps is None else f"{row.min_tcp_gbps:.3g} Gb/s"
                click.echo(f"{row.id:>4}  {row.created_at:%Y-%m-%d %H:%M}  {row.verdict:<8}  {row.cluster_size} nodes  "
                           f"{row.links} links  {row.flagged} flagged  {row.not_run} not run  slowest TCP {tcp}")
        return
    links, topology = applied_links(int(line_rate * 1000))
    options = CheckOptions(seconds=seconds, streams=streams, port=port, topology=topology, rdma=not no_rdma,
                           nccl=not no_nccl)
    with Fleet() as fleet:
        report = run_check(FleetShell(fleet), links, options, _progress(as_json))
    check_id = history.add(report)
    if as_json:
        click.echo(json.dumps(check_json(report, check_id), indent=2))
    else:
        click.echo(check_text(report, check_id))
    if report.verdict in (Verdict.failed, Verdict.degraded):
        ctx.exit(1)


def check_json(report: FabricCheckReport, check_id: int) -> dict[str, Any]:
    return {"id": check_id, "verdict": report.verdict.value, "summary": report.summary(),
            **report.model_dump(mode="json")}


def check_text(report: FabricCheckReport, check_id: int) -> str:
    lines = []
    for link in report.links:
        lines.append(f"{link.verdict.value.upper():<8} {link.a} ({link.a_address}) <-> {link.b} ({link.b_address}), "
                     f"line rate {link.line_rate_gbps:g} Gb/s")
        for m in link.measurements:
            if m.test in ("iperf3", "ib_write_bw") or m.verdict is not Verdict.passed:
                lines.append(f"    {m.text()}")
    for m in report.cluster:
        lines.append(f"CLUSTER  {m.text()}")
    lines.append(f"Fabric check {check_id}: {report.summary()}.")
    return "\n".join(lines)
