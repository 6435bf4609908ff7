"""Unicast fallback: probe an address or a subnet for SSH, only when the user asks.

Bounded and polite: at most ``MAX_SCAN_HOSTS`` addresses per scan (a /22),
at most ``DEFAULT_CONCURRENCY`` connections at once, a per-host time limit,
and per host nothing but one TCP connection that reads the server's
identification line (RFC 4253 section 4.2: the server speaks first) and
closes. No reverse DNS and no other traffic.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from sparksync.core.discovery.errors import ScanRefusedError
from sparksync.core.discovery.manual import Resolver, resolve_host
from sparksync.core.discovery.merge import Sighting, build_node
from sparksync.core.discovery.model import DiscoveredNode

log = logging.getLogger(__name__)

MAX_SCAN_HOSTS = 1024
DEFAULT_CONCURRENCY = 32
DEFAULT_PROBE_TIMEOUT_S = 1.0
# RFC 4253: lines before the identification are allowed; each is at most 255 bytes.
_MAX_PRE_BANNER_LINES = 10
_LINE_LIMIT = 1024

Status = Literal["ssh", "open", "closed", "timeout", "unreachable"]


class ProbeResult(BaseModel):
    address: str
    port: int
    status: Status  # ssh: spoke SSH-2.0; open: accepted but did not speak SSH
    banner: str | None = None
    elapsed_s: float


def scan_targets(
    target: str, *, max_hosts: int = MAX_SCAN_HOSTS, resolver: Resolver = socket.getaddrinfo
) -> list[str]:
    """The addresses a scan of ``target`` (an IP, a CIDR subnet or a host name) would probe."""
    text = target.strip()
    if "/" in text:
        return _subnet_hosts(text, max_hosts)
    return [_unicast(address, text) for address in resolve_host(text, resolver=resolver).addresses]


def _subnet_hosts(text: str, max_hosts: int) -> list[str]:
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError as exc:
        raise ScanRefusedError(
            f"{text!r} is not a subnet ({exc}); write one such as 192.168.1.0/24"
        ) from None
    # hosts() leaves out an IPv4 subnet's network and broadcast addresses.
    count = network.num_addresses - (2 if network.version == 4 and network.prefixlen < 31 else 0)
    if count > max_hosts:
        raise ScanRefusedError(
            f"{network} holds {count} addresses; a scan covers at most {max_hosts}. "
            "Scan a smaller subnet (for example the /24 the nodes are on), "
            "or add the nodes by name or address."
        )
    return [_unicast(str(address), text) for address in network.hosts()] or [_unicast(str(network[0]), text)]


def _unicast(address: str, target: str) -> str:
    parsed = ipaddress.ip_address(address)
    if parsed.is_multicast or parsed.is_unspecified or parsed == ipaddress.IPv4Address("255.255.255.255"):
        raise ScanRefusedError(f"{target!r} is not a unicast address; scan a host or a subnet of hosts")
    return address


async def probe(address: str, port: int = 22, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> ProbeResult:
    """Connect to ``address:port``, read the SSH identification line, close."""
    started = time.monotonic()

    def result(status: Status, banner: str | None = None) -> ProbeResult:
        return ProbeResult(address=address, port=port, status=status, banner=banner,
                           elapsed_s=time.monotonic() - started)  # fmt: skip

    try:
        banner = await asyncio.wait_for(_read_banner(address, port), timeout_s)
    except asyncio.TimeoutError:
        return result("timeout")
    except ConnectionRefusedError:
        return result("closed")
    except OSError:
        return result("unreachable")
    return result("open") if banner is None else result("ssh", banner)


async def _read_banner(address: str, port: int) -> str | None:
    reader, writer = await asyncio.open_connection(address, port, limit=_LINE_LIMIT)
    try:
        for _ in range(_MAX_PRE_BANNER_LINES):
            line = (await reader.readline()).decode("ascii", "replace").rstrip("\r\n")
            if line.startswith(("SSH-2.0-", "SSH-1.99-")):  # 1.99: a server that also speaks 2.0
                return line[:255]
            if not line:
                return None  # closed, or an empty line no SSH server sends
        return None
    except (ValueError, asyncio.LimitOverrunError):  # a line longer than any SSH banner
        return None
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass


async def scan(
    target: str,
    port: int = 22,
    *,
    timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
    concurrency: int = DEFAULT_CONCURRENCY,
    max_hosts: int = MAX_SCAN_HOSTS,
    on_result: Callable[[ProbeResult, int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> list[ProbeResult]:
    """Probe every address of ``target``; ``on_result(result, done, total)`` reports progress.

    Setting ``cancel`` stops new probes; those in flight end within ``timeout_s``.
    """
    if not 0 < port < 65536:
        raise ScanRefusedError(f"port {port} is out of range; give a port between 1 and 65535")
    addresses = scan_targets(target, max_hosts=max_hosts)
    gate = asyncio.Semaphore(max(1, min(concurrency, DEFAULT_CONCURRENCY * 4)))
    results: list[ProbeResult] = []

    async def one(address: str) -> None:
        async with gate:
            if cancel is not None and cancel.is_set():
                return
            found = await probe(address, port, timeout_s)
        results.append(found)
        if on_result is not None:
            on_result(found, len(results), len(addresses))

    log.info("scanning %d address(es) of %s on port %d", len(addresses), target, port)
    await asyncio.gather(*(one(address) for address in addresses))
    return sorted(results, key=lambda r: ipaddress.ip_address(r.address))


def ssh_nodes(results: list[ProbeResult]) -> list[DiscoveredNode]:
    """The hosts that spoke SSH, as discovered nodes of source "scan"."""
    now = time.time()
    return [
        build_node([Sighting("scan", (), (r.address,), now, r.port, banner=r.banner)])
        for r in results
        if r.status == "ssh"
    ]


def scan_nodes(target: str, port: int = 22, **options) -> list[DiscoveredNode]:
    """Blocking form of ``scan`` (for a CLI or a worker thread): the SSH hosts found."""
    return ssh_nodes(asyncio.run(scan(target, port, **options)))
