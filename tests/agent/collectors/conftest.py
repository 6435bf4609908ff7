"""Fake /proc, /sys and /etc trees for the collector tests."""

from __future__ import annotations

from pathlib import Path

import pytest


class FakeTree:
    """Writes the few kernel files the collectors read, under tmp_path."""

    def __init__(self, root: Path):
        self.proc = root / "proc"
        self.sys = root / "sys"
        self.etc = root / "etc"
        for path in (self.proc, self.sys, self.etc):
            path.mkdir()

    @staticmethod
    def write(path: Path, text: str | bytes) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        return path

    def meminfo(self, **kb: int) -> None:
        lines = [f"{key}:{value:>16} kB" for key, value in kb.items()]
        lines.append("HugePages_Total:       0")  # a line without a unit, as the real file has
        self.write(self.proc / "meminfo", "\n".join(lines) + "\n")

    def stat(self, cpus: dict[str, list[int]], btime: int = 1_700_000_000) -> None:
        lines = [f"{name} " + " ".join(str(v) for v in ticks) for name, ticks in cpus.items()]
        lines += ["intr 12345 0 0 7", "ctxt 999", f"btime {btime}", "processes 42"]
        self.write(self.proc / "stat", "\n".join(lines) + "\n")

    def loadavg(self, one: float, five: float, fifteen: float) -> None:
        self.write(self.proc / "loadavg", f"{one:.2f} {five:.2f} {fifteen:.2f} 1/123 4567\n")

    def net_dev(self, counters: dict[str, dict[str, int]]) -> None:
        """counters: name -> any of rx_bytes, rx_packets, rx_errs, rx_drop, tx_bytes, ... (others 0)."""
        header = (
            "Inter-|   Receive                                                |  Transmit\n"
            " face |bytes    packets errs drop fifo frame compressed multicast"
            "|bytes    packets errs drop fifo colls carrier compressed\n"
        )
        order = ["bytes", "packets", "errs", "drop", "fifo", "frame", "compressed", "multicast"]
        rows = []
        for name, values in counters.items():
            rx = [values.get(f"rx_{k}", 0) for k in order]
            tx = [values.get(f"tx_{k}", 0) for k in order]
            rows.append(f"{name:>6}: " + " ".join(f"{v:>8}" for v in rx + tx))
        self.write(self.proc / "net" / "dev", header + "\n".join(rows) + "\n")

    def interface(
        self,
        name: str,
        speed: str | None = "1000",
        mtu: int = 1500,
        operstate: str = "up",
        flags: str = "0x1003",
        virtual: bool = False,
    ) -> None:
        base = self.sys / "class" / "net" / name
        attrs = {"mtu": str(mtu), "operstate": operstate, "flags": flags}
        if speed is not None:
            attrs["speed"] = speed
        for attr, value in attrs.items():
            self.write(base / attr, value + "\n")
        if virtual:
            (self.sys / "devices" / "virtual" / "net" / name).mkdir(parents=True, exist_ok=True)

    def rdma_port(
        self,
        device: str,
        port: int,
        rcv: int,
        xmit: int,
        state: str = "4: ACTIVE",
        rate: str = "200 Gb/sec (4X HDR)",
    ) -> Path:
        base = self.sys / "class" / "infiniband" / device / "ports" / str(port)
        self.write(base / "counters" / "port_rcv_data", f"{rcv}\n")
        self.write(base / "counters" / "port_xmit_data", f"{xmit}\n")
        self.write(base / "state", state + "\n")
        self.write(base / "rate", rate + "\n")
        return base


@pytest.fixture
def tree(tmp_path: Path) -> FakeTree:
    return FakeTree(tmp_path)
