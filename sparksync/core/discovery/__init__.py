"""Finding nodes: mDNS browsing, manual add by name or address, and a unicast SSH scan.

- ``Discovery``: the live, merged list from ``_sparksync._tcp``, ``_ssh._tcp``
  and ``_workstation._tcp`` (browse.py, merge.py).
- ``resolve_host``: a node typed by the user (manual.py).
- ``scan``/``scan_nodes``: a bounded SSH probe of an address or subnet that the
  user starts (scan.py).
"""

from sparksync.core.discovery.browse import SERVICE_TYPES, Discovery
from sparksync.core.discovery.errors import (
    DiscoveryError,
    HostNotFoundError,
    InterfaceError,
    ScanRefusedError,
)
from sparksync.core.discovery.interfaces import check_interfaces, default_interfaces
from sparksync.core.discovery.manual import resolve_host
from sparksync.core.discovery.model import DiscoveredNode, looks_like_spark
from sparksync.core.discovery.scan import MAX_SCAN_HOSTS, ProbeResult, probe, scan, scan_nodes, ssh_nodes

__all__ = [
    "MAX_SCAN_HOSTS",
    "SERVICE_TYPES",
    "DiscoveredNode",
    "Discovery",
    "DiscoveryError",
    "HostNotFoundError",
    "InterfaceError",
    "ProbeResult",
    "ScanRefusedError",
    "check_interfaces",
    "default_interfaces",
    "looks_like_spark",
    "probe",
    "resolve_host",
    "scan",
    "scan_nodes",
    "ssh_nodes",
]
