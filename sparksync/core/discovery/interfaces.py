"""Which local IPv4 addresses mDNS browsing binds to.

Discovery always hands zeroconf an explicit list of addresses (never "all
interfaces"): the user sees what is used, tests stay on loopback or in a lab
namespace, and nothing is sent on an interface nobody asked for.
"""

from __future__ import annotations

import ipaddress
import socket
from concurrent.futures import ThreadPoolExecutor

import psutil
from zeroconf import IPVersion, Zeroconf

from sparksync.core.discovery.errors import InterfaceError


def _local_ipv4() -> dict[str, str]:
    """IPv4 address -> interface name, for every interface that is up."""
    stats = psutil.net_if_stats()
    return {
        entry.address: nic
        for nic, entries in psutil.net_if_addrs().items()
        if nic in stats and stats[nic].isup
        for entry in entries
        if entry.family == socket.AF_INET
    }


def _multicast_capable(nic: str) -> bool:
    flags = getattr(psutil.net_if_stats().get(nic), "flags", None)
    # Older psutil has no flags; then trust the interface rather than drop it.
    return flags is None or "multicast" in flags.split(",")


def default_interfaces() -> list[str]:
    """This machine's non-loopback IPv4 addresses on interfaces that are up and do multicast."""
    found = [
        address
        for address, nic in _local_ipv4().items()
        if not ipaddress.ip_address(address).is_loopback and _multicast_capable(nic)
    ]
    if not found:
        raise InterfaceError(
            "this computer has no network interface with an IPv4 address to browse mDNS on. "
            "Connect it to the nodes' network, or add nodes by name or address (manual add or --scan)."
        )
    return sorted(found, key=ipaddress.ip_address)


def check_interfaces(interfaces: list[str]) -> list[str]:
    """The given addresses, validated: IPv4, unicast, and assigned to an interface of this machine."""
    if not interfaces:
        raise InterfaceError("no interface address given; pass at least one, e.g. --interface 192.168.1.20")
    checked = [_check_one(text) for text in interfaces]
    local = _local_ipv4()
    missing = [address for address in checked if address not in local]
    if missing:
        raise InterfaceError(
            f"cannot browse on {', '.join(missing)}: "
            "no interface of this machine that is up has that address. "
            f"Use one of: {', '.join(sorted(local, key=ipaddress.ip_address)) or 'none found'}."
        )
    return list(dict.fromkeys(checked))


def _check_one(text: str) -> str:
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        raise InterfaceError(
            f"{text!r} is not an IP address; --interface takes one such as 192.168.1.20"
        ) from None
    if address.version != 4:
        raise InterfaceError(f"{address} is IPv6; discovery browses IPv4 only, so give an IPv4 address")
    if address.is_unspecified or address.is_multicast or address == ipaddress.IPv4Address("255.255.255.255"):
        raise InterfaceError(f"{address} is not an interface address; give this machine's own IPv4 address")
    return str(address)


def open_zeroconf(interfaces: list[str]) -> Zeroconf:
    """A Zeroconf bound to exactly ``interfaces`` (IPv4), running its own event loop thread.

    Zeroconf attaches to an asyncio loop running in the calling thread, and
    discovery needs one of its own (callers block on it). Building it in a
    fresh thread guarantees that whoever calls.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sparksync-zeroconf-init") as pool:
        return pool.submit(Zeroconf, interfaces=interfaces, ip_version=IPVersion.V4Only).result()
