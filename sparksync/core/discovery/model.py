"""What discovery reports: one ``DiscoveredNode`` per machine, whatever told us about it.

A node can be seen through several sources at once: our agent's
``_sparksync._tcp`` advertisement, Avahi's ``_ssh._tcp`` and
``_workstation._tcp``, a name the user typed ("manual") or a unicast SSH
probe ("scan"). ``merge.py`` folds them into one entry; this module holds the
entry itself and the small rules about host names.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Kind = Literal["agent", "spark", "ssh"]
Source = Literal["sparksync", "ssh", "workstation", "manual", "scan"]

# Default hostnames of DGX Spark units: NVIDIA's own ("spark-1a2b") and OEM
# GB10 machines such as ASUS's ("gx10-1a2b"). Add an OEM prefix here when one
# is confirmed; the suffix is the per-unit part the factory appends.
SPARK_HOSTNAME_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"^spark-[0-9a-z]{4,}$"),
    re.compile(r"^gx10-[0-9a-z]{4,}$"),
)


class DiscoveredNode(BaseModel):
    """One machine on the network, merged from every source that mentioned it.

    ``key`` identifies the entry in a live list: ``fp:SHA256:...`` when an SSH
    host-key fingerprint is known (it survives address changes), otherwise
    ``host:<name>`` or ``addr:<ip>``. When a fingerprint becomes known later
    the key changes, and a live list reports the old key removed and the new
    one added.
    """

    model_config = ConfigDict(frozen=True)

    key: str
    hostname: str = Field(description="Best name to show and to connect to; an IP when no name is known.")
    addresses: list[str]
    ssh_port: int = 22
    kind: Kind = Field(
        description="agent: runs our agent; spark: a likely Spark without it; ssh: any SSH host."
    )
    likely_spark: bool = False
    node_id: str | None = None
    agent_version: str | None = None
    protocol_version: str | None = None
    mem_total_bytes: int | None = None
    arch: str | None = None
    host_key_fingerprints: dict[str, str] = Field(default_factory=dict)
    sources: list[Source] = Field(default_factory=list)
    ssh_banner: str | None = Field(
        default=None, description="What a unicast scan read, e.g. SSH-2.0-OpenSSH_9.6."
    )
    last_seen: float


def normalize_host(name: str) -> str:
    """Comparable form of a host name: lower case, no trailing dot, no ``.local``.

    ``Spark-1A2B.local.`` and ``spark-1a2b`` (the name the agent reports) are
    the same machine; ``spark-1a2b.example.com`` is kept whole, since a unicast
    DNS name says nothing about which mDNS host it is.
    """
    text = name.strip().lower().rstrip(".")
    return text[: -len(".local")] if text.endswith(".local") else text


def is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def looks_like_spark(name: str) -> bool:
    """True for default Spark hostnames (``spark-xxxx``, ``gx10-xxxx``), with or without ``.local``."""
    label = normalize_host(name).split(".", 1)[0]
    return any(pattern.match(label) for pattern in SPARK_HOSTNAME_PATTERNS)


def sort_addresses(addresses: set[str] | list[str]) -> list[str]:
    """IPv4 before IPv6, each in numeric order, so output is stable."""
    parsed = {ipaddress.ip_address(address) for address in addresses}
    return [str(address) for address in sorted(parsed, key=lambda a: (a.version, a))]
