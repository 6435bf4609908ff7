"""``sparksync node discover``: list the nodes on the network, each as soon as it is heard.

Browses mDNS for ``--timeout`` seconds on ``--interface`` addresses (default:
this machine's non-loopback IPv4 addresses), optionally probes the addresses
or subnets given with ``--scan`` for SSH, and prints one merged entry per
machine: a JSON array of DiscoveredNode with ``--json``, else a table. Each
node is told on stderr the moment it is found; with ``--stream`` the entries
themselves go to stdout as they come (``--json --stream``: one JSON object a
line, ``{"event": "added" | "updated" | "removed", "elapsed_s": ..., "node":
{...}}``). The command ends ``--timeout`` seconds after it started: its own start
(loading zeroconf, opening the sockets) is inside that time, not on top of
it, and it stops browsing at once. ``elapsed_s`` counts from the start too.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from datetime import datetime

import click

from sparksync.cli.command_clock import command_started
from sparksync.core.base import SparkSyncError
from sparksync.core.discovery import DEFAULT_PROBE_TIMEOUT_S, DiscoveredNode, Discovery, merge_nodes, scan_nodes

DEFAULT_TIMEOUT_S = 3.0


@click.command("discover")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of discovered nodes.")
@click.option(
    "--stream",
    is_flag=True,
    help="Print each node to stdout as it is found or changes (with --json: one JSON object a line).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1, max=600),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="Seconds until the command ends (its start-up included), listening for mDNS answers.",
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
    stream: bool,
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
    started = command_started()
    teller = _Teller(as_json, stream, started)
    if no_mdns:
        scanned = [node for target in scans for node in scan_nodes(target, port, timeout_s=scan_timeout)]
        nodes = merge_nodes(scanned, "scan")
        for node in nodes:
            teller.tell("added", node)
    else:
        nodes = _browse(list(interfaces) or None, scans, port, scan_timeout, started + timeout, teller)
    if not stream:
        _print(nodes, as_json)
    elif not nodes:
        _print([], as_json=False)  # only the hint, on stderr


def _browse(
    interfaces: list[str] | None, scans: tuple[str, ...], port: int, scan_timeout: float, deadline: float,
    teller: _Teller,
) -> list[DiscoveredNode]:
    """Browse until ``deadline`` (monotonic), telling each change as it happens; then stop at once."""
    events: queue.SimpleQueue[tuple[str, DiscoveredNode | SparkSyncError]] = queue.SimpleQueue()
    discovery = Discovery(interfaces)
    # Called from zeroconf's thread under the table's lock: only hand the event over.
    discovery.add_listener(lambda event, node: events.put((event, node)))
    discovery.start()
    try:
        if scans:  # the scans run beside the browsing, and their hits merge into the same table
            threading.Thread(
                target=_scan_into, args=(discovery, scans, port, scan_timeout, events), name="discover-scan",
                daemon=True,
            ).start()
        while (left := deadline - time.monotonic()) > 0:
            try:
                event, item = events.get(timeout=left)
            except queue.Empty:
                break
            if isinstance(item, SparkSyncError):
                raise item  # a --scan the scan refused: one clear line, as without mDNS
            teller.tell(event, item)
        return discovery.nodes()
    finally:
        discovery.stop()


def _scan_into(discovery: Discovery, scans: tuple[str, ...], port: int, scan_timeout: float, events) -> None:
    try:
        for target in scans:
            for node in scan_nodes(target, port, timeout_s=scan_timeout):
                discovery.add(node, "scan")
    except SparkSyncError as exc:
        events.put(("error", exc))


class _Teller:
    """Each change as it happens: a line on stderr, or with --stream the entry itself on stdout."""

    def __init__(self, as_json: bool, stream: bool, started: float):
        self.as_json, self.stream, self.started = as_json, stream, started
        self._told: set[str] = set()

    def tell(self, event: str, node: DiscoveredNode) -> None:
        elapsed = time.monotonic() - self.started
        if self.stream and self.as_json:
            line = {"event": event, "elapsed_s": round(elapsed, 3), "node": node.model_dump(mode="json")}
            click.echo(json.dumps(line))
        elif self.stream:
            click.echo(f"{event:<8} {elapsed:6.2f} s  " + "  ".join(_row(node)))
        elif event == "added" and node.key not in self._told:
            self._told.add(node.key)
            addresses = ", ".join(node.addresses) or "-"
            click.echo(f"found {node.hostname} ({addresses}, {node.kind}) after {elapsed:.2f} s", err=True)


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
