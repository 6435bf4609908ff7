"""Publish this node on the local network as ``_sparksync._tcp`` (mDNS/DNS-SD).

Only what a client needs to find a node and check it before pairing is
published: the SSH port (the only way in), the addresses it is reachable on,
and a TXT record with its identity and SSH host-key fingerprints. The agent's
API port and token are never published: the API listens on loopback only and
is reached through SSH.

``txt_record`` and ``parse_txt`` are pure so the client's discovery can reuse
them and both sides agree on the TXT keys.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket

import psutil
from zeroconf import Error as ZeroconfError
from zeroconf import IPVersion
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

from sparksync_agent import protocol
from sparksync_agent.errors import AdvertiseError

log = logging.getLogger(__name__)

__all__ = [
    "SERVICE_TYPE",
    "TXT_VERSION",
    "Advertiser",
    "fingerprints_from_txt",
    "host_label",
    "instance_name",
    "parse_txt",
    "short_key_type",
    "txt_record",
]

SERVICE_TYPE = "_sparksync._tcp.local."
TXT_VERSION = "1"
FINGERPRINT_PREFIX = "fp_"

# RFC 6763: an instance name is one DNS label (<= 63 bytes) and each TXT
# string ("key=value") is at most 255 bytes.
_MAX_LABEL_BYTES = 63
_MAX_TXT_ENTRY_BYTES = 255
_SHORT_ID_LEN = 8


# --- names -------------------------------------------------------------------


def _fit_utf8(text: str, max_bytes: int) -> str:
    """Cut ``text`` to at most ``max_bytes`` of UTF-8 without splitting a character."""
    return text.encode("utf-8")[:max_bytes].decode("utf-8", "ignore")


def _short_id(node_id: str) -> str:
    return re.sub(r"[^a-z0-9]", "", node_id.lower())[:_SHORT_ID_LEN] or "node"


def host_label(hostname: str, node_id: str = "") -> str:
    """The DNS label for ``<label>.local.``: the hostname's first label, made DNS-safe.

    ``spark-1a2b.local`` and ``spark-1a2b.example.com`` both give ``spark-1a2b``.
    """
    first = hostname.strip().lower().split(".", 1)[0]
    label = re.sub(r"[^a-z0-9-]+", "-", first)[:_MAX_LABEL_BYTES].strip("-")
    return label or f"sparksync-{_short_id(node_id)}"


def instance_name(info: protocol.NodeInfo) -> str:
    """``<host>-<short node id>``, at most 63 bytes.

    The node id part keeps two machines with the same hostname apart, so it is
    what gets kept when the label has to be shortened.
    """
    suffix = "-" + _short_id(info.node_id)
    host = _fit_utf8(host_label(info.hostname, info.node_id), _MAX_LABEL_BYTES - len(suffix))
    return host.rstrip("-") + suffix


# --- TXT record ----------------------------------------------------------------


def short_key_type(key_type: str) -> str:
    """``ssh-ed25519``/``ED25519``/``(ED25519)`` -> ``ed25519``; ``ecdsa-sha2-nistp256`` -> ``ecdsa``.

    Both spellings occur: the OpenSSH key name and what ``ssh-keygen -l`` prints.
    Returns "" for a type that leaves nothing usable.
    """
    text = key_type.strip().strip("()").lower().split("@", 1)[0]
    parts = [p for p in text.split("-") if p and p not in ("ssh", "sk")]
    short = re.sub(r"[^a-z0-9]", "", parts[0]) if parts else ""
    return {"dss": "dsa"}.get(short, short)


def _fingerprint_entries(fingerprints: dict[str, str]) -> dict[str, str]:
    entries: dict[str, str] = {}
    for key_type, fingerprint in sorted(fingerprints.items()):
        short = short_key_type(key_type)
        # The TXT record promises SHA-256; an MD5 or empty value would only mislead a cross-check.
        if short and fingerprint.startswith("SHA256:"):
            entries.setdefault(FINGERPRINT_PREFIX + short, fingerprint)
        else:
            log.debug("not advertising host key %r: no usable SHA256 fingerprint", key_type)
    return entries


def _fit_entry(key: str, value: str) -> str:
    limit = _MAX_TXT_ENTRY_BYTES - len(key.encode()) - 1
    fitted = _fit_utf8(value, limit)
    if fitted != value:
        log.warning("TXT value for %r is longer than mDNS allows; it was shortened", key)
    return fitted


def txt_record(info: protocol.NodeInfo, mem_total_bytes: int) -> dict[str, str]:
    """The TXT record for this node. It never holds the API token or the API port."""
    entries = {
        "txtvers": TXT_VERSION,
        "node_id": info.node_id,
        "hostname": info.hostname,
        "agent_version": info.agent_version,
        "protocol": info.protocol_version,
        "mem_total": str(int(mem_total_bytes)),
        "arch": info.arch,
        **_fingerprint_entries(info.ssh_host_key_fingerprints),
    }
    return {key: _fit_entry(key, value) for key, value in entries.items()}


def parse_txt(properties: dict[bytes, bytes | None]) -> dict[str, str]:
    """Decode a TXT record as zeroconf gives it (``ServiceInfo.properties``).

    Keys are case-insensitive (RFC 6763 section 6.4), so they come back lower
    case; a key without '=' has the value "". Bytes that are not UTF-8 are
    replaced rather than refused, since the record comes from the network.
    """
    txt: dict[str, str] = {}
    for raw_key, raw_value in properties.items():
        key = raw_key.decode("utf-8", "replace").strip().lower()
        if key and key not in txt:
            txt[key] = "" if raw_value is None else raw_value.decode("utf-8", "replace")
    return txt


def fingerprints_from_txt(txt: dict[str, str]) -> dict[str, str]:
    """Short key type -> ``SHA256:...`` from a parsed TXT record."""
    return {
        key[len(FINGERPRINT_PREFIX) :]: value
        for key, value in txt.items()
        if key.startswith(FINGERPRINT_PREFIX) and value.startswith("SHA256:")
    }


# --- the advertiser ------------------------------------------------------------


def _parse_addresses(interfaces: list[str]) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    if not interfaces:
        raise ValueError("no interface address to advertise on; pass at least one --interface IP")
    try:
        return [ipaddress.ip_address(address) for address in interfaces]
    except ValueError as exc:
        raise ValueError(f"{exc}; --interface takes an IP address such as 192.168.1.20") from exc


def _local_addresses() -> set[str]:
    """Every IP address on this machine's interfaces (in this network namespace)."""
    return {
        str(ipaddress.ip_address(entry.address.split("%", 1)[0]))
        for entries in psutil.net_if_addrs().values()
        for entry in entries
        if entry.family in (socket.AF_INET, socket.AF_INET6)
    }


def _check_local(interfaces: list[str]) -> None:
    # Checked up front: zeroconf fails later with a bare "No such device" and
    # leaves its listening socket to the garbage collector.
    local = _local_addresses()
    missing = [address for address in interfaces if address not in local]
    if missing:
        raise AdvertiseError(
            f"cannot advertise on {', '.join(missing)}: no interface of this machine has that address. "
            f"Pass --interface with one of: {', '.join(sorted(local)) or 'none found'}."
        )


class Advertiser:
    """Publishes one node as ``_sparksync._tcp`` on the given interface addresses.

    Meant to run inside the agent's asyncio loop: ``AsyncZeroconf`` created
    there attaches to that loop instead of starting a thread of its own.
    """

    def __init__(
        self,
        info: protocol.NodeInfo,
        mem_total_bytes: int,
        interfaces: list[str],
        ssh_port: int = 22,
    ) -> None:
        addresses = _parse_addresses(interfaces)
        if not 0 < ssh_port < 65536:
            raise ValueError(f"SSH port {ssh_port} is out of range; give a port between 1 and 65535")
        self._interfaces = [str(address) for address in addresses]
        all_v4 = all(address.version == 4 for address in addresses)
        self._ip_version = IPVersion.V4Only if all_v4 else IPVersion.All
        self.service_info = AsyncServiceInfo(
            SERVICE_TYPE,
            f"{instance_name(info)}.{SERVICE_TYPE}",
            port=ssh_port,
            properties=txt_record(info, mem_total_bytes),
            server=f"{host_label(info.hostname, info.node_id)}.local.",
            parsed_addresses=self._interfaces,
        )
        self._aiozc: AsyncZeroconf | None = None
        self._registered = False

    @property
    def advertising(self) -> bool:
        return self._registered

    @property
    def name(self) -> str:
        """The full service name; it may change at start() if another host holds it."""
        return self.service_info.name

    async def start(self) -> None:
        """Probe for the name and announce it (about 1.7 s, all of it awaited)."""
        if self._aiozc is not None:
            return
        _check_local(self._interfaces)
        try:
            self._aiozc = AsyncZeroconf(interfaces=self._interfaces, ip_version=self._ip_version)
            # allow_name_change: a clone of this machine (same hostname and node id)
            # must not stop the agent from starting; it gets a "-2" style name.
            announced = await self._aiozc.async_register_service(self.service_info, allow_name_change=True)
            await announced
        except (OSError, ZeroconfError) as exc:
            await self.stop()
            raise AdvertiseError(
                f"cannot advertise {SERVICE_TYPE} on {', '.join(self._interfaces)}: {exc}. "
                "Check that each --interface address belongs to an interface of this machine "
                "that is up and allows multicast, or start the agent without --advertise."
            ) from exc
        self._registered = True
        log.info("advertising %s on %s", self.service_info.name, ", ".join(self._interfaces))

    async def stop(self) -> None:
        """Send the goodbye and close zeroconf. Safe to call twice, or after a failed start()."""
        aiozc, self._aiozc = self._aiozc, None
        if aiozc is None:
            return
        try:
            if self._registered:
                await (await aiozc.async_unregister_service(self.service_info))
        except Exception:  # a failed goodbye must not keep the sockets open
            log.warning("could not send the mDNS goodbye for %s", self.service_info.name, exc_info=True)
        finally:
            self._registered = False
            await aiozc.async_close()
        log.info("stopped advertising %s", self.service_info.name)
