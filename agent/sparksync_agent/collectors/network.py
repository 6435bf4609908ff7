"""Per-interface network telemetry from /proc/net/dev and /sys/class/net.

Byte and packet counters come from one read of /proc/net/dev per sample.
Link attributes (speed, MTU, up/down, kind) and addresses change rarely and
cost a sysfs read or a netlink dump per interface, so they are refreshed at
most every ``link_refresh_s`` seconds (and at once for a new interface):
an up/down change therefore shows within that delay.

On a real node (:class:`LinkWatch`) the kernel says when a link or an
address changes: the collector looks for such news about once a second (one
non-blocking ``recv``) and re-reads the links only then, or every
``LINK_SAFETY_REFRESH_S`` in case a change went unannounced. At 10 Hz the
blind 5-second re-read (some 65 system calls each time, sysfs reads and a
netlink dump) was about 4 % of the agent's CPU.

Counter reset: on the 64-bit kernels SparkSync runs on these counters are
64 bits wide, so a counter that goes backwards was reset (driver reload,
interface re-created) and the rate counts from 0 after the reset; it is never
negative and never a 2**64-sized spike.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import TypeAdapter

from sparksync_agent.collectors import Collector
from sparksync_agent.collectors.sysfs import KernelFile, read_attr, read_int_attr
from sparksync_agent.protocol import InterfaceKind, NetInterfaceSample

log = logging.getLogger(__name__)

AddressSource = Callable[[], Mapping[str, list[str]]]

# ConnectX-7 ports are named by PCI path plus the physical port, e.g. enp1s0f0np0, enP2p1s0f1np1.
_FABRIC = re.compile(r"^en\w*np\d+$")
_VIRTUAL_PREFIXES = (
    "veth", "docker", "br-", "virbr", "vnet", "tun", "tap", "wg", "tailscale", "cni", "flannel", "cali",
)  # fmt: skip
_MANAGEMENT_PREFIXES = ("eth", "en", "wl", "ww")
_IFF_UP = 0x1

# /proc/net/dev columns after "name:": rx bytes packets errs drop fifo frame compressed multicast,
# then tx bytes packets errs drop fifo colls carrier compressed. parse_counters keeps eight of them.
_RX_BYTES, _RX_PACKETS, _RX_ERRS, _RX_DROP = 0, 1, 2, 3
_TX_BYTES, _TX_PACKETS, _TX_ERRS, _TX_DROP = 8, 9, 10, 11

# The per-sample half of NetInterfaceSample's JSON, written by hand on the sampling
# path (sample() checks the result against the model); the link half is cached.
_COUNTERS_JSON = (
    b',"rx_bytes_per_s":%r,"tx_bytes_per_s":%r,"rx_packets_per_s":%r,"tx_packets_per_s":%r,'
    b'"rx_errors":%d,"rx_drops":%d,"tx_errors":%d,"tx_drops":%d}'
)
_INTERFACES = TypeAdapter(list[NetInterfaceSample])

# rtnetlink multicast groups (linux/rtnetlink.h): link state, IPv4 and IPv6 addresses.
_RTMGRP_LINK, _RTMGRP_IPV4_IFADDR, _RTMGRP_IPV6_IFADDR = 0x1, 0x10, 0x100
_NETLINK_ROUTE = 0
WATCH_EVERY_S = 1.0  # how often the watch is asked: a change shows within about a second
LINK_SAFETY_REFRESH_S = 60.0  # with a watch, links are re-read at least this often anyway


class LinkWatch:
    """News from the kernel that a link or an address changed (rtnetlink multicast).

    ``changed()`` drains what has arrived without blocking. When the socket
    cannot be opened (no netlink: not Linux, a sandbox) ``available`` is False
    and the collector falls back to re-reading on a timer.
    """

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        try:
            family = socket.AF_NETLINK  # type: ignore[attr-defined,unused-ignore]  # Linux only
            sock = socket.socket(family, socket.SOCK_RAW | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC,
                                 _NETLINK_ROUTE)  # fmt: skip
        except (AttributeError, OSError) as exc:
            log.debug("no rtnetlink watch (%s); interface links are re-read on a timer", exc)
            return
        try:
            sock.bind((0, _RTMGRP_LINK | _RTMGRP_IPV4_IFADDR | _RTMGRP_IPV6_IFADDR))
        except OSError as exc:
            sock.close()
            log.debug("no rtnetlink watch (%s); interface links are re-read on a timer", exc)
            return
        self._sock = sock

    @property
    def available(self) -> bool:
        return self._sock is not None

    def changed(self) -> bool:
        """True when the kernel announced a change since the last call (or some news was lost)."""
        sock, news = self._sock, False
        if sock is None:
            return False
        while True:
            try:
                sock.recv(65536)
            except BlockingIOError:
                return news
            except OSError:  # ENOBUFS: announcements overflowed the socket; something changed
                return True
            news = True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def classify_interface(name: str, sys_root: Path = Path("/sys")) -> InterfaceKind:
    """What an interface is for. Name rules win over the sysfs "virtual" check,
    so a veth renamed eth0 inside a namespace still counts as management."""
    if name == "lo":
        return InterfaceKind.loopback
    if _FABRIC.match(name):
        return InterfaceKind.fabric
    if name.startswith(_VIRTUAL_PREFIXES):
        return InterfaceKind.virtual
    if name.startswith(_MANAGEMENT_PREFIXES):
        return InterfaceKind.management
    if (sys_root / "devices" / "virtual" / "net" / name).exists():
        return InterfaceKind.virtual
    return InterfaceKind.other


def split_net_dev(data: bytes) -> dict[bytes, bytes]:
    """Interface name -> the rest of its /proc/net/dev line: its counters, not parsed yet."""
    lines: dict[bytes, bytes] = {}
    for line in data.split(b"\n")[2:]:
        name, sep, rest = line.partition(b":")
        if sep:
            lines[name.strip()] = rest
    return lines


def parse_counters(rest: bytes) -> tuple[int, ...]:
    """One interface's counters (the part of its line after "name:"), in ``Counters`` order."""
    v = rest.split()
    return (
        int(v[_RX_BYTES]), int(v[_RX_PACKETS]), int(v[_RX_ERRS]), int(v[_RX_DROP]),
        int(v[_TX_BYTES]), int(v[_TX_PACKETS]), int(v[_TX_ERRS]), int(v[_TX_DROP]),
    )  # fmt: skip


def rates_per_s(old: tuple[int, ...], new: tuple[int, ...], dt: float) -> tuple[float, float, float, float]:
    """rx bytes, tx bytes, rx packets, tx packets per second (see counter_delta: a counter
    that went backwards was reset). Written out rather than looped: it runs per interface
    at every sample."""
    if dt <= 0:
        return 0.0, 0.0, 0.0, 0.0
    rxb, rxp, txb, txp = new[0], new[1], new[4], new[5]
    return (
        (rxb - old[0] if rxb >= old[0] else rxb) / dt,
        (txb - old[4] if txb >= old[4] else txb) / dt,
        (rxp - old[1] if rxp >= old[1] else rxp) / dt,
        (txp - old[5] if txp >= old[5] else txp) / dt,
    )


def psutil_addresses() -> dict[str, list[str]]:
    """IPv4 and IPv6 addresses per interface as 'address/prefix' (no MAC addresses)."""
    import psutil  # imported here: tests inject their own source

    wanted = (socket.AF_INET, socket.AF_INET6)
    return {
        name: [_with_prefix(a.address, a.netmask) for a in addrs if a.family in wanted]
        for name, addrs in psutil.net_if_addrs().items()
    }


def _with_prefix(address: str, netmask: str | None) -> str:
    if not netmask:
        return address
    try:
        prefix = ipaddress.ip_network(f"0.0.0.0/{netmask}").prefixlen if "." in netmask else _v6_prefix(netmask)
    except ValueError:
        return address
    return f"{address}/{prefix}"


def _v6_prefix(netmask: str) -> int:
    return int(ipaddress.IPv6Address(netmask)).bit_count()


def is_link_up(operstate: str | None, flags: int | None) -> bool:
    # Loopback and tunnels report operstate "unknown"; then the admin-up flag decides.
    if operstate == "up":
        return True
    if operstate in (None, "unknown"):
        return bool(flags is not None and flags & _IFF_UP)
    return False


@dataclass
class _Link:
    """What an interface is and how it is set up: read every few seconds, not per sample."""

    name: str
    kind: InterfaceKind
    is_up: bool
    speed_mbps: int | None
    mtu: int | None
    addresses: list[str] = field(default_factory=list)  # as the source gives them: 'ip' or 'ip/prefix'
    json_head: bytes = field(init=False, repr=False)  # b'{"name":...,"addresses":[...]': all but the counters

    def __post_init__(self) -> None:
        plain = [a.split("/", 1)[0] for a in self.addresses]
        networks = [a for a in self.addresses if "/" in a]
        head = {"name": self.name, "kind": self.kind.value, "is_up": self.is_up, "speed_mbps": self.speed_mbps,
                "mtu": self.mtu, "addresses": plain, "networks": networks}  # fmt: skip
        self.json_head = json.dumps(head, separators=(",", ":"), ensure_ascii=False).encode()[:-1]


class NetworkCollector(Collector):
    name = "network"
    field = "net"

    def __init__(
        self,
        proc_root: Path = Path("/proc"),
        sys_root: Path = Path("/sys"),
        addresses: AddressSource | None = None,
        link_refresh_s: float = 5.0,
        link_watch: LinkWatch | None = None,
    ):
        self._dev = KernelFile(str(proc_root / "net" / "dev"))
        self._sys_root = sys_root
        self._addresses = addresses or psutil_addresses
        self._watch = link_watch if link_watch is not None and link_watch.available else None
        self._link_refresh_s = LINK_SAFETY_REFRESH_S if self._watch is not None else link_refresh_s
        self._watched_at = 0.0
        self._links: dict[bytes, _Link] = {}
        self._links_at: float | None = None
        # Per interface: its line's counters text and their values, as of the previous sample.
        self._previous: dict[bytes, tuple[bytes, tuple[int, ...]]] = {}
        self._previous_at = 0.0
        # Interface -> (link head, JSON entry) of those whose counters stood still.
        self._still: dict[bytes, tuple[bytes, bytes]] = {}

    def sample(self, now: float) -> list[NetInterfaceSample]:
        return _INTERFACES.validate_json(self.encode(now))

    def encode(self, now: float) -> bytes:
        lines = split_net_dev(self._dev.read())
        if self._links_stale(now, lines):
            self._refresh_links(now, lines)
        previous, current = self._previous, {}
        dt, self._previous_at = now - self._previous_at, now
        links, encoded, still, self._still = self._links, [], self._still, {}
        for name, rest in lines.items():
            head = links[name].json_head
            old = previous.get(name)
            if old is not None and old[0] == rest:
                # No counter moved since the previous sample (idle ports are most of a node's list):
                # the line is not even parsed, and the entry is the one written last time it stood still.
                current[name] = old
                entry = still.get(name)
                if entry is None or entry[0] is not head:
                    values = old[1]
                    entry = (head, head + _COUNTERS_JSON % (0.0, 0.0, 0.0, 0.0, *values[2:4], *values[6:8]))
                self._still[name] = entry
                encoded.append(entry[1])
                continue
            values = parse_counters(rest)
            current[name] = (rest, values)
            # A new interface (or the first sample) has no rate yet: 0, not a since-boot figure.
            rates = rates_per_s(old[1], values, dt) if old is not None else (0.0, 0.0, 0.0, 0.0)
            encoded.append(head + _COUNTERS_JSON % (*rates, *values[2:4], *values[6:8]))
        self._previous = current
        return b"[%s]" % b",".join(encoded)

    def close(self) -> None:
        self._dev.close()
        if self._watch is not None:
            self._watch.close()

    def _links_stale(self, now: float, lines: dict[bytes, bytes]) -> bool:
        if self._links_at is None or now - self._links_at >= self._link_refresh_s:
            return True
        if self._watch is not None and now - self._watched_at >= WATCH_EVERY_S:
            self._watched_at = now
            if self._watch.changed():
                return True
        return not lines.keys() <= self._links.keys()  # a new interface

    def _refresh_links(self, now: float, lines: dict[bytes, bytes]) -> None:
        try:
            addresses = self._addresses()
        except Exception:
            log.debug("reading interface addresses failed", exc_info=True)
            addresses = {}
        names = {raw: raw.decode("utf-8", "replace") for raw in lines}
        self._links = {raw: self._read_link(name, addresses.get(name, [])) for raw, name in names.items()}
        self._links_at = now

    def _read_link(self, name: str, addresses: list[str]) -> _Link:
        base = str(self._sys_root / "class" / "net" / name)
        speed = read_int_attr(base + "/speed")
        return _Link(
            name,
            kind=classify_interface(name, self._sys_root),
            is_up=is_link_up(read_attr(base + "/operstate"), read_int_attr(base + "/flags")),
            speed_mbps=speed if speed is not None and speed > 0 else None,
            mtu=read_int_attr(base + "/mtu"),
            addresses=list(addresses),
        )
