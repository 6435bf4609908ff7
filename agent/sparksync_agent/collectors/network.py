"""Per-interface network telemetry from /proc/net/dev and /sys/class/net.

Byte and packet counters come from one read of /proc/net/dev per sample.
Link attributes (speed, MTU, up/down, kind) and addresses change rarely and
cost a sysfs read or a netlink dump per interface, so they are refreshed at
most every ``link_refresh_s`` seconds (and at once for a new interface):
an up/down change therefore shows within that delay.

Counter reset: on the 64-bit kernels SparkSync runs on these counters are
64 bits wide, so a counter that goes backwards was reset (driver reload,
interface re-created) and the rate counts from 0 after the reset; it is never
negative and never a 2**64-sized spike.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sparksync_agent.collectors import Collector
from sparksync_agent.collectors.counters import counter_delta, rate
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
# then tx bytes packets errs drop fifo colls carrier compressed.
_RX_BYTES, _RX_PACKETS, _RX_ERRS, _RX_DROP = 0, 1, 2, 3
_TX_BYTES, _TX_PACKETS, _TX_ERRS, _TX_DROP = 8, 9, 10, 11


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


def parse_net_dev(data: bytes) -> dict[str, list[int]]:
    """Interface name -> its 16 counters, in /proc/net/dev order."""
    counters: dict[str, list[int]] = {}
    for line in data.split(b"\n")[2:]:
        name, sep, rest = line.partition(b":")
        if sep:
            counters[name.strip().decode()] = [int(v) for v in rest.split()]
    return counters


def psutil_addresses() -> dict[str, list[str]]:
    """IPv4 and IPv6 addresses per interface (no MAC addresses)."""
    import psutil  # imported here: tests inject their own source

    wanted = (socket.AF_INET, socket.AF_INET6)
    return {
        name: [a.address for a in addrs if a.family in wanted]
        for name, addrs in psutil.net_if_addrs().items()
    }


def is_link_up(operstate: str | None, flags: int | None) -> bool:
    # Loopback and tunnels report operstate "unknown"; then the admin-up flag decides.
    if operstate == "up":
        return True
    if operstate in (None, "unknown"):
        return bool(flags is not None and flags & _IFF_UP)
    return False


@dataclass
class _Link:
    kind: InterfaceKind
    is_up: bool
    speed_mbps: int | None
    mtu: int | None
    addresses: list[str] = field(default_factory=list)


class NetworkCollector(Collector):
    name = "network"
    field = "net"

    def __init__(
        self,
        proc_root: Path = Path("/proc"),
        sys_root: Path = Path("/sys"),
        addresses: AddressSource | None = None,
        link_refresh_s: float = 5.0,
    ):
        self._dev = KernelFile(str(proc_root / "net" / "dev"))
        self._sys_root = sys_root
        self._addresses = addresses or psutil_addresses
        self._link_refresh_s = link_refresh_s
        self._links: dict[str, _Link] = {}
        self._links_at: float | None = None
        self._previous: dict[str, tuple[float, list[int]]] = {}

    def sample(self, now: float) -> list[NetInterfaceSample]:
        counters = parse_net_dev(self._dev.read())
        if self._links_stale(now, counters):
            self._refresh_links(now, counters)
        samples = [self._interface_sample(name, values, now) for name, values in counters.items()]
        self._previous = {name: (now, values) for name, values in counters.items()}
        return samples

    def close(self) -> None:
        self._dev.close()

    def _links_stale(self, now: float, counters: dict[str, list[int]]) -> bool:
        if self._links_at is None or now - self._links_at >= self._link_refresh_s:
            return True
        return any(name not in self._links for name in counters)

    def _refresh_links(self, now: float, counters: dict[str, list[int]]) -> None:
        try:
            addresses = self._addresses()
        except Exception:  # noqa: BLE001 - addresses are a nicety; counters must keep flowing
            log.debug("reading interface addresses failed", exc_info=True)
            addresses = {}
        self._links = {name: self._read_link(name, addresses.get(name, [])) for name in counters}
        self._links_at = now

    def _read_link(self, name: str, addresses: list[str]) -> _Link:
        base = str(self._sys_root / "class" / "net" / name)
        speed = read_int_attr(base + "/speed")
        return _Link(
            kind=classify_interface(name, self._sys_root),
            is_up=is_link_up(read_attr(base + "/operstate"), read_int_attr(base + "/flags")),
            speed_mbps=speed if speed is not None and speed > 0 else None,
            mtu=read_int_attr(base + "/mtu"),
            addresses=list(addresses),
        )

    def _interface_sample(self, name: str, values: list[int], now: float) -> NetInterfaceSample:
        link = self._links[name]
        before, old = self._previous.get(name, (now, values))
        dt = now - before

        def per_s(i: int) -> float:
            return rate(counter_delta(old[i], values[i]), dt)

        # Every value is already typed by our own parsing; skip re-validating ~15 fields
        # per interface at every sample.
        return NetInterfaceSample.model_construct(
            name=name,
            kind=link.kind,
            is_up=link.is_up,
            speed_mbps=link.speed_mbps,
            mtu=link.mtu,
            addresses=link.addresses,
            rx_bytes_per_s=per_s(_RX_BYTES),
            tx_bytes_per_s=per_s(_TX_BYTES),
            rx_packets_per_s=per_s(_RX_PACKETS),
            tx_packets_per_s=per_s(_TX_PACKETS),
            rx_errors=values[_RX_ERRS],
            tx_errors=values[_TX_ERRS],
            rx_drops=values[_RX_DROP],
            tx_drops=values[_TX_DROP],
        )
