"""The namespace lab itself: nodes reach each other, the host is untouched, teardown leaves nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from subprocess import PIPE

import pytest

from .netlab import Lab, LabError, existing_labs, list_netns, netns_pids, reap_stale_labs

PY = sys.executable
PORT = 7700

ECHO_SERVER = """
import socket, sys
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
while True:
    conn, _ = srv.accept()
    with conn:
        conn.sendall(b"echo:" + conn.recv(100))
"""

ECHO_CLIENT = """
import json, socket, sys
me, port, peers = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
answers = {}
for peer in peers:
    with socket.create_connection((peer, port), timeout=5, source_address=(me, 0)) as s:
        s.sendall(me.encode())
        answers[peer] = s.recv(100).decode()
print(json.dumps(answers))
"""

MCAST_RECEIVER = """
import socket, sys
ip, group, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((group, port))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(group) + socket.inet_aton(ip))
s.settimeout(5)
print("joined", flush=True)
data, (sender, _) = s.recvfrom(100)
print(data.decode(), sender, flush=True)
"""

MCAST_SENDER = """
import socket, sys
ip, group, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(ip))
s.sendto(b"hello-from-" + ip.encode(), (group, port))
"""


def link_names(ip_o_link: str) -> list[str]:
    """Interface names from 'ip -o link show' ("2: eth0@if3: <...>")."""
    return [line.split(":")[1].strip().split("@")[0] for line in ip_o_link.splitlines()]


def host_links() -> set[str]:
    done = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True)
    return set(link_names(done.stdout))


def process_gone(pid: int) -> bool:
    """Gone, or a zombie that only waits for its parent (it holds no namespace)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_every_node_reaches_every_other_over_tcp(lab_factory):
    lab = lab_factory(3)
    servers = [lab.popen(n, [PY, "-c", ECHO_SERVER, n.ip, str(PORT)], stdout=PIPE) for n in lab.nodes]
    for server in servers:
        assert lab.read_line(server, 10).strip() == "listening"
    for node in lab.nodes:
        peers = [peer.ip for peer in lab.nodes if peer is not node]
        done = lab.exec(node, [PY, "-c", ECHO_CLIENT, node.ip, str(PORT), *peers], check=True)
        assert json.loads(done.stdout) == {peer: f"echo:{node.ip}" for peer in peers}


def test_multicast_crosses_the_bridge(lab_factory):
    lab = lab_factory(3)
    group, port = "239.77.0.1", 7701
    sender, receivers = lab.nodes[0], lab.nodes[1:]
    procs = [
        lab.popen(n, [PY, "-c", MCAST_RECEIVER, n.ip, group, str(port)], stdout=PIPE) for n in receivers
    ]
    for proc in procs:
        assert lab.read_line(proc, 10).strip() == "joined"
    lab.exec(sender, [PY, "-c", MCAST_SENDER, sender.ip, group, str(port)], check=True)
    for proc in procs:
        assert lab.read_line(proc, 10).split() == [f"hello-from-{sender.ip}", sender.ip]


def test_nodes_see_only_their_own_links_and_the_host_is_untouched(lab_factory):
    before = host_links()
    lab = lab_factory(2)
    assert host_links() == before
    for node in lab.nodes:
        links = lab.exec(node, ["ip", "-o", "link", "show"], check=True).stdout
        assert sorted(link_names(links)) == ["eth0", "lo"]
        addr = lab.exec(node, ["ip", "-o", "-4", "addr", "show", "dev", "eth0"], check=True).stdout
        assert f"inet {node.ip}/24" in addr
    lab.teardown()
    assert host_links() == before


def test_teardown_kills_every_process_and_removes_namespaces(lab_factory):
    lab = lab_factory(2)
    node = lab.nodes[0]
    tracked = lab.popen(node, ["sleep", "300"])
    # A detached grandchild that ignores SIGTERM: only "ip netns pids" finds it, only SIGKILL ends it.
    lab.exec(node, ["sh", "-c", "(trap '' TERM; exec sleep 300) >/dev/null 2>&1 &"], check=True)
    pids = netns_pids(node.netns)
    assert tracked.pid in pids and len(pids) == 2
    lab.teardown()
    assert tracked.returncode is not None
    assert all(process_gone(pid) for pid in pids)
    assert not any(name.startswith(f"sslab-{lab.id}-") for name in list_netns())
    lab.teardown()  # idempotent


def test_failed_build_removes_what_was_built(netns_ready):
    built: list[str] = []

    class BreaksOnSecondNode(Lab):
        def _build_node(self, node):
            built.append(self.id)
            if node.index == 2:
                raise LabError("simulated failure")
            super()._build_node(node)

    with pytest.raises(LabError, match="simulated failure"):
        BreaksOnSecondNode.create(3)
    assert built and built[0] not in existing_labs()


def test_reaping_removes_labs_of_dead_owners_but_keeps_cli_labs(netns_ready):
    finished = subprocess.Popen(["true"])
    finished.wait()  # its pid now names no process: the owner of an aborted run
    dead_owner = Lab.create(1, owner=finished.pid)
    cli = Lab.create(1, owner=0)
    try:
        reaped = reap_stale_labs()
        assert dead_owner.id in reaped and dead_owner.id not in existing_labs()
        assert cli.id not in reaped and cli.id in existing_labs()
    finally:
        dead_owner.teardown()
        cli.teardown()


def test_script_up_and_down(netns_ready):
    script = Path(__file__).with_name("netlab.py")
    up = subprocess.run([PY, str(script), "up", "2"], capture_output=True, text=True, timeout=30)
    assert up.returncode == 0, up.stderr
    lab = json.loads(up.stdout)
    try:
        assert [n["ip"].rsplit(".", 1)[1] for n in lab["nodes"]] == ["1", "2"]
        assert set(existing_labs()[lab["id"]]) == {lab["hub"], *(n["netns"] for n in lab["nodes"])}
    finally:
        down = subprocess.run([PY, str(script), "down", lab["id"]], capture_output=True, text=True)
    assert down.returncode == 0, down.stderr
    assert lab["id"] not in existing_labs()


def test_node_count_is_checked():
    with pytest.raises(ValueError, match="1 to"):
        Lab(0)
    with pytest.raises(ValueError, match="1 to"):
        Lab(201)
