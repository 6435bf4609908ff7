"""CX-7-like fabric ports on lab nodes, cabled as a switch, a ring or a direct pair.

A DGX Spark's ConnectX-7 has two QSFP ports, and each port shows as two
netdevs ("twins") on two PCI domains::

    port 0: enp1s0f0np0  enP2p1s0f0np0
    port 1: enp1s0f1np1  enP2p1s0f1np1

``FabricLab(lab)`` gives every node of a ``netlab.Lab`` these four netdevs,
each a veth end inside the node whose peer sits in the lab's hub namespace.
A peer that is down (or in no bridge) is an empty QSFP cage: the node's end
reads ``carrier 0``. Cabling puts the peers into bridges in the hub:

- ``cable(a, pa, b, pb)``: one bridge holding node a's port ``pa`` (both
  twins) and node b's port ``pb`` (both twins), the one L2 segment a real
  cable makes between two ports;
- ``switch(nodes, port)``: one bridge holding that port of every node;
  ``switch(ports=(0, 1))`` puts both ports of every node on it (all Spark
  ports in one L2 segment, as NVIDIA's switch guide asks);
- ``ring(nodes)``: node i's port 1 cabled to node i+1's port 0, round;
- ``direct(a, b)``: a's port 0 cabled to b's port 0.

``cut`` unplugs a port (its node end loses carrier), ``plug`` puts it back;
``shape`` caps a port's rate in both directions (``tc tbf``, the lab's one
way to shape a fabric link), ``unshape`` lifts it.
Every hub bridge and hub end has MTU 9000 so a planned jumbo MTU is carried.

IPv6 link-local addresses come up on their own, as on a Spark; duplicate
address detection is switched off in the lab namespaces so they are usable
at once rather than after a second of DAD.

``grant_sudo(user)`` puts a lab node's user in Debian's ``sudo`` group, so
``sudo`` asks for that user's password, as on a Spark where the user is an
administrator. ``lab.teardown`` deletes the users (and with them the group
membership) and the namespaces (and with them every cable).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

from .netlab import Lab, LabError, LabNode, ip

# (port 0 twins, port 1 twins), first the PCI domain 0 netdev then the domain 2 one.
CX7_PORTS: tuple[tuple[str, str], ...] = (
    ("enp1s0f0np0", "enP2p1s0f0np0"),
    ("enp1s0f1np1", "enP2p1s0f1np1"),
)
CX7_INTERFACES: tuple[str, ...] = tuple(name for twins in CX7_PORTS for name in twins)
HUB_MTU = 9000
VETH_SPEED_MBPS = 10_000  # what the kernel's veth reports as its speed


@dataclass
class Cable:
    """One bridge in the hub: the L2 segment of a cable or a switch."""

    bridge: str
    ends: list[tuple[str, int]]  # (node name, port)
    switch: bool = False


@dataclass
class FabricLab:
    """The fabric ports of ``lab``'s nodes (all of them, or ``nodes``) and their cabling."""

    lab: Lab
    nodes: list[LabNode] | None = None
    cables: list[Cable] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.nodes = list(self.lab.nodes if self.nodes is None else self.nodes)
        for node in self.nodes:
            self._add_ports(node)

    # --- names ------------------------------------------------------------------------------

    @staticmethod
    def interface(port: int, twin: int) -> str:
        return CX7_PORTS[port][twin]

    @staticmethod
    def hub_end(node: LabNode, port: int, twin: int) -> str:
        return f"f{node.index}p{port}{'ab'[twin]}"

    def node(self, name: str) -> LabNode:
        return self.lab.node(name)

    # --- cabling ----------------------------------------------------------------------------

    def cable(self, a: LabNode, a_port: int, b: LabNode, b_port: int) -> Cable:
        """A cable from ``a``'s port ``a_port`` to ``b``'s port ``b_port`` (``a`` may be ``b``)."""
        return self._segment([(a, a_port), (b, b_port)], switch=False)

    def switch(self, nodes: list[LabNode] | None = None, port: int = 0, ports: tuple[int, ...] | None = None) -> Cable:
        """One switch for ``port`` of every node (or for each of ``ports``: both ports on one segment)."""
        chosen = ports if ports is not None else (port,)
        return self._segment([(node, p) for node in (nodes or self.nodes or []) for p in chosen], switch=True)

    def ring(self, nodes: list[LabNode] | None = None) -> list[Cable]:
        members = list(nodes or self.nodes or [])
        if len(members) < 3:
            raise ValueError(f"a ring needs 3 nodes or more, not {len(members)}")
        return [self.cable(node, 1, members[(i + 1) % len(members)], 0) for i, node in enumerate(members)]

    def direct(self, a: LabNode, b: LabNode) -> Cable:
        return self.cable(a, 0, b, 0)

    def cut(self, node: LabNode, port: int) -> None:
        """Unplug the port: its node ends lose carrier."""
        for twin in (0, 1):
            ip("-n", self.lab.hub, "link", "set", self.hub_end(node, port, twin), "down")

    def plug(self, node: LabNode, port: int) -> None:
        for twin in (0, 1):
            ip("-n", self.lab.hub, "link", "set", self.hub_end(node, port, twin), "up")

    def shape(self, node: LabNode, port: int, rate: str) -> None:
        """Cap both directions of the port (both twins, the node's ends and the hub's) to ``rate`` ("1gbit").

        The lab's one way to shape a link: a token bucket (``tc tbf``), which every kernel has; no
        netem (delay, loss), which some kernels (this test VM's: no sch_netem module) lack.
        """
        qdisc = ["tbf", "rate", rate, "burst", "64kb", "latency", "100ms"]
        for twin in (0, 1):
            self._tc(self.lab.wrap(node, ["tc"]), self.interface(port, twin), qdisc)
            self._tc(["ip", "netns", "exec", self.lab.hub, "tc"], self.hub_end(node, port, twin), qdisc)

    def unshape(self, node: LabNode, port: int) -> None:
        for twin in (0, 1):
            for argv, dev in ((self.lab.wrap(node, ["tc"]), self.interface(port, twin)),
                              (["ip", "netns", "exec", self.lab.hub, "tc"], self.hub_end(node, port, twin))):
                subprocess.run([*argv, "qdisc", "del", "dev", dev, "root"], capture_output=True, timeout=15)

    # --- what tests read ----------------------------------------------------------------------

    def has(self, node: LabNode, interface: str) -> bool:
        return self.lab.exec(node, ["test", "-e", f"/sys/class/net/{interface}"]).returncode == 0

    def mac(self, node: LabNode, interface: str) -> str:
        done = self.lab.exec(node, ["cat", f"/sys/class/net/{interface}/address"], check=True)
        return done.stdout.strip()

    def addresses(self, node: LabNode, interface: str) -> list[str]:
        """The interface's IPv4 addresses with their prefix (``10.0.0.1/30``)."""
        done = self.lab.exec(node, ["ip", "-4", "-o", "addr", "show", "dev", interface], check=True)
        return [line.split()[3] for line in done.stdout.splitlines() if line.strip()]

    def mtu(self, node: LabNode, interface: str) -> int:
        done = self.lab.exec(node, ["cat", f"/sys/class/net/{interface}/mtu"], check=True)
        return int(done.stdout)

    def remove_interface(self, node: LabNode, interface: str) -> None:
        """Take a netdev away (as a driver reset would), so a step that needs it fails."""
        ip("-n", node.netns, "link", "del", interface)

    def cap_mtu(self, node: LabNode, interface: str) -> None:
        """Make ``interface`` a netdev that cannot take a jumbo MTU, still cabled as before.

        The veth end is renamed and becomes the parent of a macvlan with the CX-7 name: a macvlan
        can never have a larger MTU than its parent (1500), so setting MTU 9000 on it fails, as it
        does on a port whose firmware caps the MTU.
        """
        ns, parent = node.netns, f"cap{node.index}{interface[-1]}"
        ip("-n", ns, "link", "set", interface, "down")
        ip("-n", ns, "link", "set", interface, "name", parent)
        ip("-n", ns, "link", "set", parent, "up")
        ip("-n", ns, "link", "add", "link", parent, "name", interface, "type", "macvlan", "mode", "bridge")
        ip("-n", ns, "link", "set", interface, "up")

    # --- internals ----------------------------------------------------------------------------

    def _add_ports(self, node: LabNode) -> None:
        ns = node.netns
        # New interfaces inherit "default": their link-local address is usable at once.
        for key in ("default", "all"):
            self.lab.exec(node, ["sysctl", "-q", "-w", f"net.ipv6.conf.{key}.accept_dad=0"], check=True)
            self.lab.exec(node, ["sysctl", "-q", "-w", f"net.ipv6.conf.{key}.disable_ipv6=0"], check=True)
        for port in (0, 1):
            for twin in (0, 1):
                name, peer = self.interface(port, twin), self.hub_end(node, port, twin)
                # Made inside the node's namespace, the peer sent to the hub: the host never sees either.
                ip("-n", ns, "link", "add", name, "type", "veth", "peer", "name", peer, "netns", self.lab.hub)
                ip("-n", self.lab.hub, "link", "set", peer, "mtu", str(HUB_MTU))
                ip("-n", ns, "link", "set", name, "up")  # no carrier until cabled

    @staticmethod
    def _tc(tc: list[str], dev: str, qdisc: list[str]) -> None:
        done = subprocess.run([*tc, "qdisc", "replace", "dev", dev, "root", *qdisc], capture_output=True,
                              text=True, timeout=15)
        if done.returncode != 0:
            raise LabError(f"tc on {dev} failed: {done.stderr.strip()}")

    def _segment(self, ends: list[tuple[LabNode, int]], switch: bool) -> Cable:
        bridge = f"fc{len(self.cables) + 1}"
        hub = self.lab.hub
        ip("-n", hub, "link", "add", bridge, "type", "bridge", "mcast_snooping", "0")
        ip("-n", hub, "link", "set", bridge, "mtu", str(HUB_MTU))
        used = {(e[0], e[1]) for cable in self.cables for e in cable.ends}
        for node, port in ends:
            if (node.name, port) in used:
                raise LabError(f"{node.name} port {port} is already cabled")
            for twin in (0, 1):
                end = self.hub_end(node, port, twin)
                ip("-n", hub, "link", "set", end, "master", bridge)
                ip("-n", hub, "link", "set", end, "up")
        ip("-n", hub, "link", "set", bridge, "up")
        cable = Cable(bridge, [(node.name, port) for node, port in ends], switch)
        self.cables.append(cable)
        return cable


def grant_sudo(user: str) -> None:
    """``user`` becomes an administrator: Debian's ``sudo`` then asks for the user's password."""
    done = subprocess.run(["usermod", "-a", "-G", "sudo", user], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise LabError(f"usermod -G sudo {user} failed: {done.stderr.strip()}")


def set_password(user: str, password: str) -> None:
    done = subprocess.run(["chpasswd"], input=f"{user}:{password}\n", capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise LabError(f"chpasswd {user} failed: {done.stderr.strip()}")


def sudo_missing() -> str | None:
    """None when Debian's sudo is here with its ``%sudo`` rule, else what is missing."""
    import shutil

    if shutil.which("sudo") is None:
        return "sudo is not installed (Debian: apt-get install sudo)"
    return None
