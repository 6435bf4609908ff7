"""Manual add: a node typed by name or address always works, mDNS or not.

mDNS is often blocked on corporate networks, so a user can always type a
host name (``spark-1a2b.local``, ``node3.lab.example.com``) or an IP. Names
under ``.local`` are asked over mDNS first (RFC 6762 reserves them for it),
then through the system resolver, which also covers networks whose unicast DNS
serves ``.local``. Nothing is connected to here; pairing does that.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable

from zeroconf import AddressResolverIPv4, DNSQuestionType, Zeroconf

from sparksync.core.discovery.errors import HostNotFoundError, InterfaceError
from sparksync.core.discovery.interfaces import check_interfaces, default_interfaces, open_zeroconf
from sparksync.core.discovery.merge import Sighting, build_node
from sparksync.core.discovery.model import DiscoveredNode, is_ip, sort_addresses

MDNS_TIMEOUT_S = 2.0
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$",
    re.I,
)

Resolver = Callable[..., list]


def resolve_host(
    host: str,
    port: int = 22,
    *,
    interfaces: list[str] | None = None,
    zeroconf: Zeroconf | None = None,
    resolver: Resolver = socket.getaddrinfo,
) -> DiscoveredNode:
    """A node for ``host`` (a name or an IP address) with every address it resolves to.

    Raises HostNotFoundError, saying why, when the name does not resolve.
    ``zeroconf`` reuses a running instance for ``.local`` names (else one is
    opened on ``interfaces``, by default this machine's own addresses).
    """
    name = _clean(host)
    if not 0 < port < 65536:
        raise HostNotFoundError(f"SSH port {port} is out of range; give a port between 1 and 65535")
    if is_ip(name):
        return _node(name, [name], port)
    addresses = _mdns_addresses(name, interfaces, zeroconf) if _is_mdns_name(name) else []
    return _node(name, addresses or _system_addresses(name, port, resolver), port)


def _clean(host: str) -> str:
    name = host.strip().strip("[]")  # "[fe80::1]" is how an IPv6 address is often written
    if not name:
        raise HostNotFoundError(
            "no host given; type the node's host name (e.g. spark-1a2b.local) or its IP address"
        )
    if not is_ip(name) and not _HOSTNAME.match(name):
        raise HostNotFoundError(
            f"{host!r} is not a valid host name or IP address; type a name such as spark-1a2b.local "
            "or an address such as 192.168.1.20 (no user@ or :port)"
        )
    return name


def _is_mdns_name(name: str) -> bool:
    return name.lower().rstrip(".").endswith(".local")


def _mdns_addresses(name: str, interfaces: list[str] | None, zeroconf: Zeroconf | None) -> list[str]:
    if zeroconf is not None:
        return _ask_mdns(zeroconf, name)
    try:
        bind = check_interfaces(interfaces) if interfaces is not None else default_interfaces()
    except InterfaceError:
        return []  # no interface for mDNS: the system resolver may still know the name
    zc = open_zeroconf(bind)
    try:
        return _ask_mdns(zc, name)
    finally:
        zc.close()


def _ask_mdns(zc: Zeroconf, name: str) -> list[str]:
    # QM: a unicast answer could land on another mDNS stack's socket (see browse.py).
    resolver = AddressResolverIPv4(name.rstrip(".") + ".")
    return (
        resolver.parsed_addresses() if resolver.request(zc, MDNS_TIMEOUT_S * 1000, DNSQuestionType.QM) else []
    )


def _system_addresses(name: str, port: int, resolver: Resolver) -> list[str]:
    try:
        answers = resolver(name, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise HostNotFoundError(_unresolved_message(name, exc)) from exc
    # sockaddr[0] of an IPv6 link-local answer may carry "%scope"; keep the bare address.
    return sort_addresses({sockaddr[0].split("%", 1)[0] for *_, sockaddr in answers})


def _unresolved_message(name: str, exc: socket.gaierror) -> str:
    reason = exc.strerror or str(exc)
    if _is_mdns_name(name):
        hint = (
            "no host answered for it over mDNS; check that the node is on and on this network and that "
            "mDNS is not blocked here, or type its IP address"
        )
    elif exc.errno in (socket.EAI_AGAIN, getattr(socket, "EAI_SYSTEM", None)):
        hint = (
            "the name server could not be reached; check this computer's network, "
            "or type the node's IP address"
        )
    else:
        hint = "check the spelling, or type the node's IP address instead"
    return f"cannot resolve host name {name!r} ({reason}): {hint}"


def _node(name: str, addresses: list[str], port: int) -> DiscoveredNode:
    names = () if is_ip(name) else (name.rstrip("."),)
    return build_node([Sighting("manual", names, tuple(addresses), time.time(), port)])
