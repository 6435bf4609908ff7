"""RDMA port traffic from /sys/class/infiniband.

RoCE traffic bypasses the IP counters, so fabric bandwidth on a DGX Spark is
only visible here. ``port_rcv_data`` and ``port_xmit_data`` count 4-byte
words (the InfiniBand PortCounters convention), so bytes = value * 4.

Counter wrap: some HCAs expose 32-bit counters. A counter that goes
backwards from below 2**32 is taken to have wrapped once at 2**32 words;
from above, it was reset and counts from 0 again. Never a negative rate.

The port list and each port's state and rate are rescanned at most every
``refresh_s`` seconds (and right after a port's counters vanish).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from sparksync_agent.collectors import Collector
from sparksync_agent.collectors.counters import WRAP_32, counter_delta, rate
from sparksync_agent.collectors.sysfs import read_attr, read_bytes
from sparksync_agent.protocol import RdmaPortSample

log = logging.getLogger(__name__)

BYTES_PER_UNIT = 4


@dataclass
class _Port:
    device: str
    port: int
    rcv_path: str
    xmit_path: str
    state: str | None
    rate: str | None


def parse_port_state(text: str | None) -> str | None:
    """'4: ACTIVE' -> 'ACTIVE'."""
    if not text:
        return None
    return text.partition(":")[2].strip() if ":" in text else text


def _sorted_entries(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def scan_ports(ib_root: Path) -> list[_Port]:
    """Every <dev>/ports/<n> under ``ib_root`` with its state and rate."""
    ports = []
    for device in _sorted_entries(str(ib_root)):
        ports_dir = f"{ib_root}/{device}/ports"
        for number in sorted(int(n) for n in _sorted_entries(ports_dir) if n.isdigit()):
            base = f"{ports_dir}/{number}"
            ports.append(
                _Port(
                    device=device,
                    port=number,
                    rcv_path=f"{base}/counters/port_rcv_data",
                    xmit_path=f"{base}/counters/port_xmit_data",
                    state=parse_port_state(read_attr(f"{base}/state")),
                    rate=read_attr(f"{base}/rate"),
                )
            )
    return ports


class RdmaCollector(Collector):
    name = "rdma"
    field = "rdma"

    def __init__(self, sys_root: Path = Path("/sys"), refresh_s: float = 5.0):
        self._ib_root = sys_root / "class" / "infiniband"
        self._refresh_s = refresh_s
        self._ports: list[_Port] = []
        self._scanned_at: float | None = None
        self._previous: dict[tuple[str, int], tuple[float, int, int]] = {}

    def sample(self, now: float) -> list[RdmaPortSample] | None:
        if self._scanned_at is None or now - self._scanned_at >= self._refresh_s:
            self._rescan(now)
        if not self._ports:
            return None  # no RDMA on this node: absent, not an error
        return [s for port in self._ports if (s := self._port_sample(port, now)) is not None]

    def _rescan(self, now: float) -> None:
        self._ports = scan_ports(self._ib_root)
        self._scanned_at = now
        present = {(p.device, p.port) for p in self._ports}
        self._previous = {k: v for k, v in self._previous.items() if k in present}

    def _port_sample(self, port: _Port, now: float) -> RdmaPortSample | None:
        try:
            rcv, xmit = int(read_bytes(port.rcv_path)), int(read_bytes(port.xmit_path))
        except (OSError, ValueError):
            # The device went away (driver reload, hot unplug): skip it and rescan next time.
            log.debug("RDMA counters of %s port %d unreadable; rescanning", port.device, port.port)
            self._scanned_at = None
            return None
        key = (port.device, port.port)
        before, old_rcv, old_xmit = self._previous.get(key, (now, rcv, xmit))
        self._previous[key] = (now, rcv, xmit)
        dt = now - before
        return RdmaPortSample(
            device=port.device,
            port=port.port,
            state=port.state,
            rate=port.rate,
            rx_bytes_per_s=rate(counter_delta(old_rcv, rcv, WRAP_32) * BYTES_PER_UNIT, dt),
            tx_bytes_per_s=rate(counter_delta(old_xmit, xmit, WRAP_32) * BYTES_PER_UNIT, dt),
            rx_bytes_total=rcv * BYTES_PER_UNIT,
            tx_bytes_total=xmit * BYTES_PER_UNIT,
        )
