"""Who is on the other end of each port: an IPv6 all-nodes ping, then the neighbour table.

No address is needed: every IPv6 host has a link-local address on every
interface and answers an echo request to ``ff02::1`` (all nodes on the
link). ``ping`` prints each answer's source; ``ip -6 neigh`` then holds the
MAC of each of them (resolved to answer). Only hosts that answered this
probe are reported, so a stale entry left by an old cable never shows.

The ports are probed in parallel, each for ``wait_s`` (one second by
default), so a node answers in about a second whatever its port count.
``ping`` needs no root: Debian and Ubuntu give it ``cap_net_raw``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from sparksync_agent.protocol import FabricNeighbour

_FROM = re.compile(r"from (?P<addr>[0-9a-fA-F:]+)(?:%\S+)?:")
PROBE_WAIT_S = 1.0


class ProbeError(RuntimeError):
    """A tool the probe needs is missing or failed in a way that hides the answers."""


def probe_all(interfaces: Iterable[str], wait_s: float = PROBE_WAIT_S) -> dict[str, list[FabricNeighbour]]:
    """Interface -> the neighbours that answered on it.

    The node's own other netdevs are kept: a port's twin on the same cable is
    no news, but its other port on the same cable means it is cabled to itself.
    """
    names = list(interfaces)
    if not names:
        return {}
    with ThreadPoolExecutor(len(names)) as pool:
        return dict(zip(names, pool.map(lambda n: probe(n, wait_s), names)))


def probe(interface: str, wait_s: float = PROBE_WAIT_S) -> list[FabricNeighbour]:
    answered = _ping_all_nodes(interface, wait_s)
    if not answered:
        return []
    table = _neighbour_table(interface)
    return [FabricNeighbour(mac=table[a], ipv6=a) for a in sorted(answered) if a in table]


def _ping_all_nodes(interface: str, wait_s: float) -> set[str]:
    ping = shutil.which("ping") or "/usr/bin/ping"
    # One request a second at most: iputils refuses a shorter interval for a multicast ping by a user.
    # The deadline (-w) ends it, so every answer within wait_s is heard.
    argv = [ping, "-6", "-n", "-c", "100", "-i", "1", "-w", f"{max(1, round(wait_s))}", f"ff02::1%{interface}"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=wait_s + 5)
    except FileNotFoundError:
        raise ProbeError("ping is not installed (Debian/Ubuntu: apt install iputils-ping)") from None
    except subprocess.TimeoutExpired:
        return set()
    if done.returncode not in (0, 1) and done.stderr.strip():
        raise ProbeError(f"ping on {interface} failed: {done.stderr.strip()}")
    return {m["addr"].lower() for m in _FROM.finditer(done.stdout)}


def _neighbour_table(interface: str) -> dict[str, str]:
    """IPv6 address -> MAC of the neighbours the kernel resolved on ``interface``."""
    ip = shutil.which("ip") or "/usr/sbin/ip"
    try:
        done = subprocess.run([ip, "-j", "-6", "neigh", "show", "dev", interface],
                              capture_output=True, text=True, timeout=5)
    except FileNotFoundError:
        raise ProbeError("ip is not installed (Debian/Ubuntu: apt install iproute2)") from None
    if done.returncode != 0:
        return {}
    try:
        entries = json.loads(done.stdout or "[]")
    except ValueError:
        return {}
    return {
        str(e["dst"]).lower(): str(e["lladdr"]).lower()
        for e in entries
        if e.get("lladdr") and e.get("dst") and "FAILED" not in e.get("state", [])
    }
