"""``sparksync node discover``: list the nodes on the network.

Browses mDNS for ``--timeout`` seconds on ``--interface`` addresses (default:
this machine's non-loopback IPv4 addresses), optionally probes the addresses
or subnets given with ``--scan`` for SSH, and prints one merged entry per
machine: a JSON array of DiscoveredNode with ``--json``, else a table.
"""

from __future__ import annotations

import json
import time
from datetime import datetime

import click

from sparksync.core.discovery import DEFAULT_PROBE_TIMEOUT_S, DiscoveredNode, Discovery, merge_nodes, scan_nodes

DEFAULT_TIMEOUT_S = 3.0


@click.command("discover")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of discovered nodes.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1, max=600),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="Seconds to listen for mDNS answers.",
)
@click.option(
    "--interface",
    "interfaces",
    multiple=True,
    metavar="IP",
    help="IPv4 address of this machine to browse on (repeatable). Default: all its non-loopback addresses.",
)
@click.option(
    "--scan",
    "scans",
    multiple=True,
    metavar="CIDR_OR_HOST",
    help="Also probe this address, host or subnet (at most a /22) for SSH (repeatable).",
)
@click.option(
    "--port", type=click.IntRange(1, 65535), default=22, show_default=True, help="SSH port for --scan."
)
@click.option(
    "--scan-timeout",
    type=click.FloatRange(min=0.05, max=30),
    default=DEFAULT_PROBE_TIMEOUT_S,
    show_default=True,
    help="Seconds to wait for each scanned host's SSH banner.",
)
@click.option("--no-mdns", is_flag=True, help="Do not browse mDNS; only --scan (for networks that block it).")
def discover(
    as_json: bool,
    timeout: float,
    interfaces: tuple[str, ...],
    scans: tuple[str, ...],
    port: int,
    scan_timeout: float,
    no_mdns: bool,
) -> None:
    """Find nodes: our agent, bare DGX Sparks and other SSH hosts on this network."""
    if no_mdns and not scans:
        raise click.UsageError("--no-mdns leaves nothing to do; give at least one --scan CIDR_OR_HOST")
    deadline = time.monotonic() + timeout
    discovery = None if no_mdns else Discovery(list(interfaces) or None).start()
    try:
        # Browsing goes on in the background while the scans run.
        scanned = [node for target in scans for node in scan_nodes(target, port, timeout_s=scan_timeout)]
        if discovery is None:
            nodes = merge_nodes(scanned, "scan")
        else:
            for node in scanned:
                discovery.add(node, "scan")
            time.sleep(max(0.0, deadline - time.monotonic()))
            nodes = discovery.nodes()
    finally:
        if discovery is not None:
            discovery.stop()
    _print(nodes, as_json)


def _print(nodes: list[DiscoveredNode], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps([node.model_dump(mode="json") for node in nodes], indent=2))
        return
    if not nodes:
        click.echo(
            "No nodes found. If mDNS is blocked on this network, try --scan with the nodes' subnet "
            "(e.g. --scan 192.168.1.0/24), or add a node by name or address.",
            err=True,
        )
        return
    click.echo(_table(nodes))


def _table(nodes: list[DiscoveredNode]) -> str:
    header = ("KIND", "SPARK", "HOSTNAME", "ADDRESSES", "PORT", "AGENT", "MEMORY", "SOURCES", "LAST SEEN")
    rows = [header] + [_row(node) for node in nodes]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(line.rstrip() for line in lines)


def _row(node: DiscoveredNode) -> tuple[str, ...]:
    agent = f"{node.agent_version} (protocol {node.protocol_version})" if node.agent_version else "-"
    memory = f"{node.mem_total_bytes / 1e9:.0f} GB" if node.mem_total_bytes else "-"
    seen = datetime.fromtimestamp(node.last_seen).strftime("%H:%M:%S")
    spark = "likely" if node.likely_spark else "-"
    addresses, sources = ", ".join(node.addresses), ",".join(node.sources)
    return (node.kind, spark, node.hostname, addresses, str(node.ssh_port), agent, memory, sources, seen)
