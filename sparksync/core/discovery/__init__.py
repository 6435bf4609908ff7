"""Finding nodes: mDNS browsing, manual add by name or address, and a unicast SSH scan.

- ``Discovery``: the live, merged list from ``_sparksync._tcp``, ``_ssh._tcp``
  and ``_workstation._tcp`` (browse.py, merge.py).
- ``resolve_host``: a node typed by the user (manual.py).
- ``scan_nodes``: a bounded SSH probe of an address or subnet that the
  user starts (scan.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.discovery.browse import SERVICE_TYPES, Discovery
    from sparksync.core.discovery.errors import (
        DiscoveryError,
        HostNotFoundError,
        InterfaceError,
        ScanRefusedError,
    )
    from sparksync.core.discovery.interfaces import check_interfaces, default_interfaces
    from sparksync.core.discovery.manual import resolve_host
    from sparksync.core.discovery.model import DiscoveredNode, is_ip, looks_like_spark
    from sparksync.core.discovery.scan import (
        DEFAULT_PROBE_TIMEOUT_S,
        MAX_SCAN_HOSTS,
        ProbeResult,
        probe,
        scan_nodes,
        ssh_nodes,
    )
    from sparksync.core.discovery.merge import merge_nodes

_WHERE = {
    "SERVICE_TYPES": "browse",
    "Discovery": "browse",
    "DiscoveryError": "errors",
    "HostNotFoundError": "errors",
    "InterfaceError": "errors",
    "ScanRefusedError": "errors",
    "check_interfaces": "interfaces",
    "default_interfaces": "interfaces",
    "resolve_host": "manual",
    "DiscoveredNode": "model",
    "is_ip": "model",
    "looks_like_spark": "model",
    "DEFAULT_PROBE_TIMEOUT_S": "scan",
    "MAX_SCAN_HOSTS": "scan",
    "ProbeResult": "scan",
    "probe": "scan",
    "scan_nodes": "scan",
    "ssh_nodes": "scan",
    "merge_nodes": "merge",
}
__all__ = [
    "DEFAULT_PROBE_TIMEOUT_S",
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
    "is_ip",
    "looks_like_spark",
    "merge_nodes",
    "probe",
    "resolve_host",
    "scan_nodes",
    "ssh_nodes",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
