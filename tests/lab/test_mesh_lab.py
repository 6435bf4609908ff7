"""Node-to-node SSH over the fabric, on lab nodes with real sshd: mesh, mesh check, mismatch, undo, unpair.

Every node is its own user with its own home (the namespaces share /home),
so one node's ``ssh`` to another is a real login with its own key into the
other's ``authorized_keys``, checked against its ``known_hosts``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sparksync.core.fabric.fabric_links import links_from_plan
from sparksync.core.fabric.mesh import (
    MeshError,
    MeshHostKeyMismatchError,
    check_mesh,
    load_mesh,
    plan_mesh,
    setup_mesh,
)
from sparksync.core.fabric.node_shell import FleetShell
from sparksync.core.fleet.fleet import Fleet
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.ssh.unpair import unpair_node
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.mesh_lab import FabricNodes, fabric_address
from tests.lab.test_pairing_lab import FAST, pair

pytestmark = pytest.mark.lab


@pytest.fixture
def client_key(real_keyring) -> ClientKey:  # noqa: F811
    return ClientKey.load_or_create(SecretStore())


@pytest.fixture
def fabric_nodes(ssh_lab_factory, client_key):
    return lambda n: FabricNodes.make(ssh_lab_factory, n, client_key, pair)


def ssh_file(lab: FabricNodes, node, name: str) -> Path:
    return lab.ssh_lab.service.home(node) / ".ssh" / name


def read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def run_mesh(lab: FabricNodes, client_key, step=setup_mesh, **kwargs):
    plan = plan_mesh(links_from_plan(lab.plan), Registry())
    with Fleet(client_key, dialer=lab.ssh_lab.dialer, settings=FAST) as fleet:
        return step(FleetShell(fleet), plan, **kwargs)


def test_mesh_on_eight_nodes_every_ordered_pair_then_unpair_takes_a_node_off_all(fabric_nodes, client_key):
    lab = fabric_nodes(8)
    events = []
    result = run_mesh(lab, client_key, progress=events.append)
    nodes = lab.nodes
    # Each node made its own key, on the node: eight different keys, no private key anywhere else.
    assert len(set(result.keys.values())) == 8 and sorted(result.created) == sorted(n.name for n in nodes)
    for node in nodes:
        assert ssh_file(lab, node, "id_ed25519_sparksync").stat().st_mode & 0o077 == 0
        authorized = read(ssh_file(lab, node, "authorized_keys")).decode()
        peers = [line for line in authorized.splitlines() if "sparksync-mesh:" in line]
        assert len(peers) == 7
        assert all(line.startswith('from="10.101.0.0/24,10.101.1.0/24",') for line in peers)
        assert result.keys[node.name].split()[1] not in authorized  # never its own key
        known = read(ssh_file(lab, node, "known_hosts")).decode()
        for peer in nodes:
            if peer is not node:  # the host key pinned at pairing, under the peer's fabric addresses
                pinned = Registry().get(peer.name).host_key
                line = f"{fabric_address(peer, 0)},{fabric_address(peer, 1)} {pinned.key_type} {pinned.key_base64}"
                assert line in known
    assert {(e.node, e.step, e.state) for e in events} >= {(n.name, "config", "done") for n in nodes}

    report = run_mesh(lab, client_key, step=check_mesh)
    assert report.ok, [p for p in report.failed]
    assert len(report.checked) == 8 * 7 * 2  # every ordered pair, over both twin subnets

    # Plain ssh from a node, as mpirun would use it: the config block names the peer's user and the key.
    n1, n2 = nodes[0], nodes[1]
    done = lab.ssh_lab.lab.exec(n1, ["su", "-", lab.ssh_lab.user(n1), "-c",
                                     f"ssh -o BatchMode=yes {fabric_address(n2, 1)} id -un"])
    assert done.returncode == 0 and done.stdout.strip() == lab.ssh_lab.user(n2), done.stderr

    n8 = nodes[7]
    n8_id = Registry().get(n8.name).node_id
    n8_key = result.keys[n8.name].split()[1]
    n8_host = Registry().get(n8.name).host_key.key_base64
    unpair_node(n8.name, client_key=client_key, dialer=lab.ssh_lab.dialer, settings=FAST)
    for node in nodes[:7]:
        assert n8_key not in read(ssh_file(lab, node, "authorized_keys")).decode()
        assert n8_host not in read(ssh_file(lab, node, "known_hosts")).decode()
        config = read(ssh_file(lab, node, "config")).decode()
        assert fabric_address(n8, 0) not in config and fabric_address(nodes[6], 0) in config or node is nodes[6]
    assert n8_id not in load_mesh().members and len(load_mesh().members) == 7
    # n8 can no longer log in to a peer with its mesh key.
    denied = lab.ssh_lab.lab.exec(n8, ["su", "-", lab.ssh_lab.user(n8), "-c",
                                       f"ssh -o BatchMode=yes {fabric_address(n1, 0)} true"])
    assert denied.returncode != 0


def impostor_sshd(lab: FabricNodes, node, address: str, workdir: Path) -> subprocess.Popen:
    """Another machine answering SSH at ``address``: its own host key, inside ``node``'s namespace."""
    workdir.mkdir(parents=True, exist_ok=True)
    key = workdir / "impostor_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    config = workdir / "sshd_config"
    config.write_text(f"Port 22\nListenAddress {address}\nHostKey {key}\nPidFile {workdir / 'pid'}\n"
                      "PasswordAuthentication no\nUsePAM no\nAllowUsers nobody-here\n")
    proc = lab.ssh_lab.lab.popen(node, ["/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from tests.lab.sshd import read_banner
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if read_banner(node.netns, address, 22, 1.0).startswith(b"SSH-2.0-"):
                break
        except OSError:
            time.sleep(0.05)
    done = subprocess.run(["ssh-keygen", "-lf", f"{key}.pub"], capture_output=True, text=True, check=True)
    proc.fingerprint = done.stdout.split()[1]  # type: ignore[attr-defined]
    return proc


def test_a_host_key_that_is_not_the_pinned_one_stops_the_mesh_with_both_fingerprints(fabric_nodes, client_key,
                                                                                        tmp_path):
    lab = fabric_nodes(3)
    n3 = lab.nodes[2]
    # n3's own sshd keeps its management address and twin 0; a stranger answers on its twin 1 address.
    info = lab.ssh_lab.service.nodes[n3.name]
    text = info.config.read_text().replace(f"ListenAddress {fabric_address(n3, 1)}\n", "")
    info.config.write_text(text)
    lab.ssh_lab.service.restart(lab.ssh_lab.lab, n3)
    impostor = impostor_sshd(lab, n3, fabric_address(n3, 1), tmp_path / "impostor")
    before = {node.name: read(ssh_file(lab, node, "authorized_keys")) for node in lab.nodes}
    with pytest.raises(MeshHostKeyMismatchError) as caught:
        run_mesh(lab, client_key)
    message = str(caught.value)
    assert lab.ssh_lab.fingerprint(n3) in message and impostor.fingerprint in message  # type: ignore[attr-defined]
    assert fabric_address(n3, 1) in message and "Nothing was changed" in message
    for node in lab.nodes:
        assert not ssh_file(lab, node, "id_ed25519_sparksync").exists()
        assert read(ssh_file(lab, node, "authorized_keys")) == before[node.name]
        assert b"sparksync-mesh" not in read(ssh_file(lab, node, "known_hosts"))


def test_a_node_failing_mid_setup_leaves_no_node_half_configured(fabric_nodes, client_key):
    lab = fabric_nodes(3)
    n2 = lab.nodes[1]
    # n2's ~/.ssh/config is a directory: its last step fails after the others have written theirs.
    ssh_file(lab, n2, "config").mkdir(parents=True)
    before = {node.name: read(ssh_file(lab, node, "authorized_keys")) for node in lab.nodes}
    events = []
    with pytest.raises(MeshError) as caught:
        run_mesh(lab, client_key, progress=events.append)
    assert "n2:" in str(caught.value) and "undone" in str(caught.value)
    for node in lab.nodes:
        assert read(ssh_file(lab, node, "authorized_keys")) == before[node.name]
        assert b"sparksync-mesh" not in read(ssh_file(lab, node, "known_hosts"))
        assert not ssh_file(lab, node, "id_ed25519_sparksync").exists()
        if node is not n2:
            assert b"sparksync" not in read(ssh_file(lab, node, "config"))
    assert {(e.node, e.step, e.state) for e in events} >= {("n1", "undo", "done"), ("n2", "config", "failed")}
    assert load_mesh().members == {}


def test_the_cli_sets_up_checks_the_mesh_and_runs_the_acceptance_test(fabric_nodes, real_keyring):  # noqa: F811
    import json

    from tests.lab.test_fleet_lab import cli_env, sparksync

    lab = fabric_nodes(3)
    env = cli_env(real_keyring)
    done = sparksync(lab.ssh_lab, env, "cluster", "mesh", "--json")
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    assert sorted(made["created"]) == ["n1", "n2", "n3"] and "n2: config ok" in done.stderr
    done = sparksync(lab.ssh_lab, env, "cluster", "mesh", "check", "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    assert json.loads(done.stdout)["checked"] == 3 * 2 * 2
    done = sparksync(lab.ssh_lab, env, "cluster", "check", "--json", "--seconds", "1", "--line-rate", "1")
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads(done.stdout)
    assert report["verdict"] == "pass" and report["id"] == 1 and "n1: iperf3 ok" in done.stderr
    figures = [m for link in report["links"] for m in link["measurements"] if m["test"] == "iperf3"]
    assert figures and all(m["percent_of_line"] > 50 for m in figures)
    listed = sparksync(lab.ssh_lab, env, "cluster", "check", "--list", "--json")
    assert [row["id"] for row in json.loads(listed.stdout)] == [1]


def test_unpair_stops_while_a_node_holding_its_key_is_unreachable_and_forget_says_where_it_is_left(
        fabric_nodes, client_key):
    from sparksync.core.ssh.errors import UnpairError

    lab = fabric_nodes(3)
    result = run_mesh(lab, client_key)
    n1, n2, n3 = lab.nodes
    n3_key = result.keys[n3.name].split()[1]
    lab.ssh_lab.stop_sshd(n2)
    with pytest.raises(UnpairError) as caught:
        unpair_node(n3.name, client_key=client_key, dialer=lab.ssh_lab.dialer, settings=FAST)
    assert "n2" in str(caught.value) and "stays paired" in str(caught.value)
    assert n3.name in Registry() and Registry().get(n3.name).node_id in load_mesh().members
    assert n3_key not in read(ssh_file(lab, n1, "authorized_keys")).decode()  # taken off n1 already
    assert n3_key in read(ssh_file(lab, n2, "authorized_keys")).decode()
    done = unpair_node(n3.name, client_key=client_key, dialer=lab.ssh_lab.dialer, settings=FAST, forget=True)
    assert any("still on n2" in w for w in done.warnings) and n3.name not in Registry()
    # Once n2 is back, the next mesh (of the nodes left) takes n3's key off it too.
    lab.ssh_lab.service.restart(lab.ssh_lab.lab, n2)
    plan = plan_mesh(links_from_plan(lab.plan).between(["n1", "n2"]), Registry())
    with Fleet(client_key, dialer=lab.ssh_lab.dialer, settings=FAST) as fleet:
        setup_mesh(FleetShell(fleet), plan)
    assert n3_key not in read(ssh_file(lab, n2, "authorized_keys")).decode()
    assert set(load_mesh().members) == {Registry().get("n1").node_id, Registry().get("n2").node_id}
