"""The one netplan file SparkSync writes, and its validation by netplan itself.

``/etc/netplan/40-sparksync-fabric.yaml`` names only the CX-7 netdevs of the
plan: static addresses, MTU, no DHCP, IPv6 link-local kept (the cabling
probe uses it), and no renderer of its own. ``validate`` writes it under a scratch root and runs the
real ``netplan generate --root-dir``, which parses it and writes the
systemd-networkd files it would give; a file netplan refuses is never
applied.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sparksync_agent.protocol import InterfacePlan

HEADER = (
    "# Written by SparkSync: the ConnectX-7 fabric (plan {plan_id}).\n"
    "# 'sparksync cluster rollback' removes it and puts back what was here before.\n"
)


def render(plan_id: str, interfaces: Sequence[InterfacePlan]) -> str:
    # No renderer: the netdevs follow the system's own (NetworkManager on a DGX OS desktop, as its
    # 01-network-manager-all.yaml sets it), as NVIDIA's own CX-7 netplan files do.
    lines = [HEADER.format(plan_id=plan_id), "network:\n", "  version: 2\n", "  ethernets:\n"]
    for iface in interfaces:
        lines += [
            f"    {iface.name}:\n",
            "      dhcp4: false\n",
            "      dhcp6: false\n",
            "      link-local: [ipv6]\n",
            f"      mtu: {int(iface.mtu)}\n",
            "      addresses:\n",
            *(f'        - "{address}"\n' for address in iface.addresses),
        ]
    return "".join(lines)


def validate(text: str, file_name: str = "40-sparksync-fabric.yaml", timeout_s: float = 60.0) -> tuple[bool, str]:
    """(accepted, what netplan said, or why it did not run)."""
    netplan = shutil.which("netplan")
    if netplan is None:
        return False, "not validated: netplan is not installed here (Debian/Ubuntu: apt install netplan.io)"
    with tempfile.TemporaryDirectory(prefix="sparksync-netplan-") as root:
        target = Path(root) / "etc" / "netplan" / file_name
        target.parent.mkdir(parents=True)
        target.write_text(text)
        target.chmod(0o600)
        try:
            done = subprocess.run([netplan, "generate", "--root-dir", root], capture_output=True, text=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False, f"netplan generate did not finish within {timeout_s:g} s"
        if done.returncode != 0:
            return False, (done.stderr or done.stdout).strip() or f"netplan generate exited {done.returncode}"
        written = sorted(p.name for p in (Path(root) / "run" / "systemd" / "network").glob("*.network"))
        return True, "netplan generate wrote " + (", ".join(written) or "nothing")
