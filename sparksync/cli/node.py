"""``sparksync node ...``: what the nodes are doing.

``sparksync node status --json`` prints one JSON document::

    {"nodes": [
        {"name": "this computer", "source": "local", "error": null,
         "snapshot": {"info": {...}, "run_id": "...", "sample_hz": 1.0, "latest": {...}}}
    ]}

``snapshot`` is the agent's ``Snapshot`` model (docs/protocol.md), with
``latest`` holding a sample; for a node that could not be read ``snapshot``
is null and ``error`` says why (the same line also goes to stderr and the
command exits non-zero).
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

import click

from sparksync.cli.discover import discover
from sparksync.core.agent_client import AgentClient
from sparksync.core.errors import SparkSyncError
from sparksync.core.nodes import NodeHandle, known_nodes
from sparksync_agent.protocol import Reading, Sample, Snapshot

FIRST_SAMPLE_TIMEOUT_S = 20.0


class NoSampleError(SparkSyncError):
    exit_code = 7


@click.group()
def node() -> None:
    """The nodes of the cluster (today: this computer)."""


node.add_command(discover)


@node.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (shape below).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=FIRST_SAMPLE_TIMEOUT_S,
    show_default=True,
    help="Seconds to wait for each node's first sample.",
)
@click.pass_context
def status(ctx: click.Context, as_json: bool, timeout: float) -> None:
    """Show each node's info and its latest telemetry sample.

    \b
    With --json it prints one document:
      {"nodes": [{"name": "this computer", "source": "local", "error": null,
                  "snapshot": {"info": {...}, "run_id": "...", "sample_hz": 1.0,
                               "latest": {...}}}]}
    "snapshot" is the agent's Snapshot (docs/protocol.md); it is null when
    the node could not be read, and "error" then says why.
    """
    reports = [_report(handle, timeout) for handle in known_nodes()]
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


def _report(handle: NodeHandle, timeout: float) -> dict[str, Any]:
    report: dict[str, Any] = {"name": handle.name, "source": handle.source, "error": None, "snapshot": None}
    try:
        with handle.connect() as client:
            report["snapshot"] = wait_first_sample(client, timeout)
    except SparkSyncError as exc:
        report["error"], report["exit_code"] = str(exc), exc.exit_code
    return report


def wait_first_sample(client: AgentClient, timeout: float) -> Snapshot:
    """The node's snapshot once it holds a sample (a fresh agent may have none yet)."""
    deadline = time.monotonic() + timeout
    while True:
        snapshot = client.snapshot()
        if snapshot.latest is not None:
            return snapshot
        if time.monotonic() > deadline:
            raise NoSampleError(
                f"the agent at {client.base_url} took no sample within {timeout:g} s. "
                "Check its collectors with the agent's status, or raise --timeout."
            )
        time.sleep(min(0.1, 1.0 / max(snapshot.sample_hz, 1.0)))


def _as_dict(report: dict[str, Any]) -> dict[str, Any]:
    snapshot = report["snapshot"]
    return {
        "name": report["name"],
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
