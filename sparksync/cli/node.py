"""``sparksync node ...``: what the nodes are doing.

``sparksync node status --json`` prints one JSON document::

    {"nodes": [
        {"name": "this computer", "id": "<its local agent's node id>", "source": "local", "error": null,
         "snapshot": {"info": {...}, "run_id": "...", "sample_hz": 1.0, "latest": {...}}}
    ]}

``id`` is the node's stable id: the one every store on this computer keys it by.

``snapshot`` is the agent's ``Snapshot`` model (docs/protocol.md), with
``latest`` holding a sample; for a node that could not be read ``snapshot``
is null and ``error`` says why (the same line also goes to stderr and the
command exits non-zero).

With paired nodes it shows those instead, asked in parallel through SSH
tunnels, each entry adding the node's ``state`` (online, offline, degraded),
``cause``, ``reason``, ``since`` and ``last_seen`` (see ``fleet_status``).
``sparksync node status local`` shows this computer whatever is paired.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click
from sparksync_agent.protocol import Reading, Sample, Snapshot

from sparksync.cli.command_clock import time_left
from sparksync.cli.fleet_status import report_json, reports_table
from sparksync.core.agents import LOCAL_NODE_NAME, is_local
from sparksync.core.base import SparkSyncError
from sparksync.core.fleet import DEGRADED_EXIT, OFFLINE_EXIT, Fleet, NodeReport, NodeState, wait_first_sample
from sparksync.core.nodes import Registry, local_node_id

FIRST_SAMPLE_TIMEOUT_S = 20.0


@click.command("status")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (shape below).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=FIRST_SAMPLE_TIMEOUT_S,
    show_default=True,
    help="Seconds the whole command may take (all nodes are asked at once; SSH connects included).",
)
@click.pass_context
def status(ctx: click.Context, names: tuple[str, ...], as_json: bool, timeout: float) -> None:
    """Show each node's state and its latest telemetry sample.

    \b
    With no paired node it shows this computer; otherwise every paired node
    (or the NAMEs given), all asked at once through SSH tunnels.
    With --json it prints one document:
      {"nodes": [{"name": "this computer", "id": "...", "source": "local",
                  "error": null, "snapshot": {"info": {...}, "run_id": "...",
                  "sample_hz": 1.0, "latest": {...}}}]}
    "snapshot" is the agent's Snapshot (docs/protocol.md); it is null when
    the node could not be read, and "error" then says why. Paired nodes
    (source "ssh") add "state" (online, offline, degraded), "cause",
    "reason", "since" and "last_seen".
    """
    if any(not is_local(n) for n in names) or (not names and len(Registry())):
        _paired_status(ctx, list(names), as_json, timeout)
        return
    with Fleet() as fleet:
        reports = [_report(fleet, timeout) | {"id": _local_id()}]
    if as_json:
        click.echo(json.dumps({"nodes": [_as_dict(r) for r in reports]}, indent=2))
    else:
        tables = [_as_table(r) for r in reports if r["snapshot"] is not None]
        if tables:
            click.echo("\n\n".join(tables))
    failed = [r for r in reports if r["error"] is not None]
    for report in failed:
        click.echo(f"sparksync: error: {report['name']}: {report['error']}", err=True)
    if failed:
        ctx.exit(failed[0]["exit_code"])


def _local_id() -> str | None:
    try:
        return local_node_id()
    except OSError:  # the data dir cannot be written: the local agent's own error says so
        return None


def _report(fleet: Fleet, timeout: float) -> dict[str, Any]:
    """This computer's latest sample, through its local agent (started for the command if none runs)."""
    report: dict[str, Any] = {"name": LOCAL_NODE_NAME, "source": "local", "error": None, "snapshot": None}
    try:
        report["snapshot"] = fleet.call(LOCAL_NODE_NAME, lambda client: wait_first_sample(client, timeout))
    except SparkSyncError as exc:
        report["error"], report["exit_code"] = str(exc), exc.exit_code
    return report


def _paired_status(ctx: click.Context, names: list[str], as_json: bool, timeout: float) -> None:
    from sparksync.core.ssh import SshSettings, node_wait_budget

    # --timeout bounds the whole command: every SSH connect ends by then too.
    budget = node_wait_budget(time_left(timeout))  # imports and start-up count
    with Fleet(settings=SshSettings.for_command(budget)) as fleet:
        reports = fleet.check_all([n for n in names if not is_local(n)] or None, with_snapshot=True,
                                  timeout=budget)  # fmt: skip
    if as_json:
        click.echo(json.dumps({"nodes": [report_json(r) for r in reports]}, indent=2))
    elif reports:
        click.echo(reports_table(reports))
    for report in reports:
        if not report.ok:
            level = "error" if report.snapshot is None else "warning"
            click.echo(f"sparksync: {level}: {report.node.name}: {report.status.reason}", err=True)
    unread = [r for r in reports if r.snapshot is None]
    if unread:
        ctx.exit(_exit_code(unread[0]))


def _exit_code(report: NodeReport) -> int:
    return OFFLINE_EXIT if report.status.state is NodeState.OFFLINE else DEGRADED_EXIT


def _as_dict(report: dict[str, Any]) -> dict[str, Any]:
    snapshot = report["snapshot"]
    return {
        "name": report["name"],
        "id": report.get("id"),
        "source": report["source"],
        "error": report["error"],
        "snapshot": snapshot.model_dump(mode="json") if snapshot is not None else None,
    }


def _as_table(report: dict[str, Any]) -> str:
    snapshot: Snapshot = report["snapshot"]
    info, sample = snapshot.info, snapshot.latest
    rows = [
        ("hostname", info.hostname),
        ("model", info.model or "-"),
        ("system", f"{info.os}, kernel {info.kernel} ({info.arch}), {info.cpu_count} CPUs"),
        ("agent", f"{info.agent_version}, protocol {info.protocol_version}"),
        *_sample_rows(sample),
    ]
    width = max(len(key) for key, _ in rows)
    lines = [f"{report['name']} ({report['source']})"]
    lines += [f"  {key:<{width}}  {value}" for key, value in rows]
    return "\n".join(lines)


def _sample_rows(sample: Sample) -> list[tuple[str, str]]:
    rows = []
    if sample.memory is not None:
        mem = sample.memory
        pct = 100.0 * mem.used_bytes / mem.total_bytes if mem.total_bytes else 0.0
        rows.append(("memory", f"{mem.used_bytes / 1e9:.1f} of {mem.total_bytes / 1e9:.1f} GB used ({pct:.0f} %)"))
    if sample.cpu is not None:
        load = " ".join(f"{x:.2f}" for x in sample.cpu.load_avg)
        rows.append(("cpu", f"{sample.cpu.percent:.0f} % (load {load})"))
    gpus = sample.gpu or []
    rows.append(("gpus", "; ".join(_gpu_line(g) for g in gpus) if gpus else "none"))
    when = datetime.fromtimestamp(sample.ts).strftime("%Y-%m-%d %H:%M:%S")
    rows.append(("sample", f"#{sample.seq} at {when}"))
    return rows


def _gpu_line(gpu) -> str:
    return (
        f"{gpu.index}: {gpu.name}, util {_reading(gpu.utilization_pct, '%')}, "
        f"{_reading(gpu.temperature_c, '°C')}, {_reading(gpu.power_w, 'W')}"
    )


def _reading(reading: Reading, unit: str) -> str:
    return f"{reading.value:g} {unit}" if reading.value is not None else "n/a"
