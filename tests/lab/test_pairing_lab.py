"""Pairing, unpairing, transports and tunnels against real sshd nodes in the namespace lab.

The client core runs in this process with a real gnome-keyring holding the
client key's passphrase; its TCP connections start from the lab's client
namespace (``ssh_lab.dialer``).
"""

from __future__ import annotations

import http.client
import os
import pwd
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import paramiko
import pytest

from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.discovery.errors import HostNotFoundError
from sparksync.core.deploy.layout import LAYOUT
from sparksync.core.nodes.identity import node_id_from_fingerprint
from sparksync.core.nodes.registry import MAX_NODES, ClusterFullError, PinnedHostKey, Registry
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.ssh.authorized_keys import count_key
from sparksync.core.ssh.connection import Endpoint, SshSettings, connect_with_key, run
from sparksync.core.ssh.errors import (
    AuthenticationFailedError,
    HostKeyChangedError,
    HostKeyMismatchError,
    HostUnreachableError,
    PairingBusyError,
    PairingError,
    UnpairError,
)
from sparksync.core.ssh.hostkeys import PinnedHostKeyPolicy
from sparksync.core.ssh.pairing import PairRequest, PairResult, pair_node
from sparksync.core.base.backoff import Backoff
from sparksync.core.ssh.transports import LinkState, NodeTransports
from sparksync.core.ssh.tunnel import open_tunnel
from sparksync.core.ssh.unpair import node_secret_name, unpair_node
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.core.node_factory import host_pkey
from tests.lab.nsnet import in_netns
from tests.lab.sshd import PASSWORD, SshLab

pytestmark = pytest.mark.lab

FAST = SshSettings(
    connect_timeout_s=2,
    handshake_timeout_s=5,
    auth_timeout_s=10,
    command_timeout_s=10,
    keepalive_s=0.5,
    dead_after_s=2,
)
QUICK_RETRY = Backoff(first_s=0.2, factor=2.0, max_s=1.0)
# For watching a cut link: each reconnect attempt gives up fast, so retries are seen quickly.
LINK = SshSettings(
    connect_timeout_s=0.5, handshake_timeout_s=3, auth_timeout_s=5, keepalive_s=0.5, dead_after_s=2
)
OTHER_KEY = f"ssh-ed25519 {host_pkey().get_base64()} someone@laptop"  # a user's own key


@pytest.fixture
def client_key(real_keyring) -> ClientKey:  # noqa: F811
    return ClientKey.load_or_create(SecretStore())


class Asked:
    """Password and confirmation callbacks that record what pairing asked for."""

    def __init__(self, password: str = PASSWORD, accept: bool = True):
        self.password, self.accept = password, accept
        self.passwords, self.fingerprints = 0, []

    def give_password(self) -> str:
        self.passwords += 1
        return self.password

    def confirm(self, fingerprint: str) -> bool:
        self.fingerprints.append(fingerprint)
        return self.accept


def pair(ssh_lab: SshLab, node, client_key, registry=None, asked=None, **request) -> PairResult:
    asked = asked or Asked()
    return pair_node(
        PairRequest(request.pop("host", node.ip), ssh_lab.user(node), **request),
        password=asked.give_password,
        confirm=asked.confirm,
        client_key=client_key,
        registry=registry if registry is not None else Registry(),
        dialer=ssh_lab.dialer,
        settings=FAST,
    )


def key_login(ssh_lab: SshLab, node, client_key, pinned: PinnedHostKey) -> str:
    """``id -un`` over a fresh key-only connection that trusts only ``pinned``."""
    endpoint = Endpoint(node.ip, 22, ssh_lab.user(node), node.name)
    transport = connect_with_key(endpoint, pinned, client_key.pkey, ssh_lab.dialer, FAST)
    try:
        return run(transport, ["id", "-un"], 10).stdout.decode().strip()
    finally:
        transport.close()


def write_authorized_keys(ssh_lab: SshLab, node, content: bytes) -> Path:
    """Give the node's user an authorized_keys as they would have made it (their own files, 700/600)."""
    path = ssh_lab.authorized_keys_path(node)
    entry = pwd.getpwnam(ssh_lab.user(node))
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_bytes(content)
    path.chmod(0o600)
    for item in (path.parent, path):
        os.chown(item, entry.pw_uid, entry.pw_gid)
    return path


def wait_for(predicate, timeout: float, what: str) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.02)
    return time.monotonic() - started


# --- pairing --------------------------------------------------------------------------------


def test_pairing_installs_our_key_once_keeps_other_lines_and_pins_the_host_key(ssh_lab_factory, client_key):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    before = f"# my keys\n{OTHER_KEY}".encode()  # no newline at the end
    path = write_authorized_keys(ssh_lab, node, before)
    asked = Asked()
    advertised = {"ssh-ed25519": ssh_lab.fingerprint(node)}  # as the agent's TXT record gives it

    result = pair(ssh_lab, node, client_key, asked=asked, advertised_fingerprints=advertised)

    assert asked.fingerprints == [ssh_lab.fingerprint(node)] and asked.passwords == 1
    assert result.key_installed and not result.already_paired
    entry = Registry().get(ssh_lab.hostname(node))  # named after the node's hostname, read back from disk
    assert entry.host == node.ip and node.ip in entry.addresses and entry.user == ssh_lab.user(node)
    assert entry.host_key.fingerprint == ssh_lab.fingerprint(node)
    assert path.read_bytes() == before + b"\n" + client_key.public_line().encode() + b"\n"
    assert key_login(ssh_lab, node, client_key, entry.host_key) == ssh_lab.user(node)

    again = pair(ssh_lab, node, client_key, asked=asked)
    assert again.already_paired and again.node.name == entry.name
    assert asked.passwords == 1  # not asked again
    assert count_key(path.read_bytes(), client_key.public_line()) == 1 and len(Registry()) == 1


def test_a_host_key_other_than_the_advertised_one_stops_pairing_before_login(ssh_lab_factory, client_key):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    asked = Asked()
    impostor = {"ed25519": "SHA256:" + "x" * 43}
    with pytest.raises(HostKeyMismatchError, match="possible impostor"):
        pair(ssh_lab, node, client_key, asked=asked, advertised_fingerprints=impostor)
    assert asked.fingerprints == [] and asked.passwords == 0
    assert not ssh_lab.authorized_keys_path(node).parent.exists() and len(Registry()) == 0


def test_a_key_the_node_then_refuses_is_removed_again(ssh_lab_factory, client_key):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    # The admin keeps keys elsewhere: ours lands in ~/.ssh/authorized_keys but never counts.
    ssh_lab.service.add_config(ssh_lab.lab, node, "AuthorizedKeysFile /nonexistent/%u")
    before = f"{OTHER_KEY}\n".encode()
    path = write_authorized_keys(ssh_lab, node, before)
    with pytest.raises(PairingError, match="does not accept it for logins, so pairing was undone"):
        pair(ssh_lab, node, client_key)
    assert path.read_bytes() == before and len(Registry()) == 0


def test_eight_nodes_pair_in_parallel_and_the_ninth_is_refused_untouched(ssh_lab_factory, client_key):
    ssh_lab = ssh_lab_factory(MAX_NODES + 1)
    eight, ninth = ssh_lab.nodes[:MAX_NODES], ssh_lab.nodes[MAX_NODES]
    started = time.monotonic()
    with ThreadPoolExecutor(MAX_NODES) as pool:
        results = list(pool.map(lambda n: pair(ssh_lab, n, client_key, name=n.name), eight))
    elapsed = time.monotonic() - started
    print(f"\npaired {MAX_NODES} lab nodes in parallel in {elapsed:.2f} s")
    assert sorted(r.node.name for r in results) == sorted(n.name for n in eight)
    assert len(Registry()) == MAX_NODES
    for node in eight:
        ssh_dir = ssh_lab.authorized_keys_path(node).parent
        assert ssh_dir.stat().st_mode & 0o777 == 0o700  # created by pairing
        assert ssh_lab.authorized_keys_path(node).read_text() == client_key.public_line() + "\n"

    asked = Asked()
    with pytest.raises(ClusterFullError) as caught:
        pair(ssh_lab, ninth, client_key, asked=asked)
    assert f"at most {MAX_NODES}" in str(caught.value) and "sparksync node unpair" in str(caught.value)
    assert asked.fingerprints == [] and asked.passwords == 0  # refused before confirming or logging in
    assert not ssh_lab.authorized_keys_path(ninth).parent.exists()
    assert len(Registry()) == MAX_NODES


def test_a_changed_host_key_stops_everything_until_an_explicit_repair(ssh_lab_factory, client_key):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    first = pair(ssh_lab, node, client_key, name="n1")
    old_fp = ssh_lab.fingerprint(node)
    ssh_lab.regenerate_host_key(node)  # a reinstalled node, or an impostor
    new_fp = ssh_lab.fingerprint(node)
    assert new_fp != old_fp

    with NodeTransports(client_key, dialer=ssh_lab.dialer, settings=FAST, backoff=QUICK_RETRY) as links:
        with pytest.raises(HostKeyChangedError) as caught:
            links.get("n1", timeout=10)
        message = str(caught.value)
        assert old_fp in message and new_fp in message
        assert f"sparksync node pair {node.ip} --repair" in message
        assert links.status("n1").state is LinkState.HOST_KEY_CHANGED
        # Paramiko's own client with our policy refuses the same way.
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(PinnedHostKeyPolicy(first.node.host_key, "n1", node.ip))
        with pytest.raises(HostKeyChangedError):
            client.connect(
                node.ip,
                username=ssh_lab.user(node),
                pkey=client_key.pkey,
                sock=ssh_lab.dialer(node.ip, 22, 5),
                allow_agent=False,
                look_for_keys=False,
            )
        client.close()
        # Pairing again without --repair does not re-trust it either; nor does unpair reach it.
        with pytest.raises(HostKeyChangedError):
            pair(ssh_lab, node, client_key)
        with pytest.raises(UnpairError, match="--forget"):
            unpair_node("n1", client_key=client_key, dialer=ssh_lab.dialer, settings=FAST)
        assert Registry().get("n1").host_key.fingerprint == old_fp

        asked = Asked()
        repaired = pair(ssh_lab, node, client_key, asked=asked, repair=True)
        assert asked.fingerprints == [new_fp] and repaired.replaced.name == "n1"
        assert Registry().names() == ["n1"] and Registry().get("n1").host_key.fingerprint == new_fp
        # The same node: the id pairing gave it (its first host key's) stays, so its data stays attached.
        assert first.node.node_id == node_id_from_fingerprint(old_fp) == Registry().get("n1").node_id
        # The link notices the new pin and connects again.
        assert run(links.get("n1", timeout=10), ["true"], 10).exit_status == 0
    assert count_key(ssh_lab.authorized_keys_path(node).read_bytes(), client_key.public_line()) == 1


def give_agent_id(ssh_lab: SshLab, node, node_id: str) -> None:
    """An agent's state dir on the node, as one deployed earlier (by any computer) leaves it."""
    entry = pwd.getpwnam(ssh_lab.user(node))
    home = ssh_lab.service.home(node)
    state = home / LAYOUT.state_dir
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    (state / "node_id").write_text(node_id + "\n")
    for path in [*(p for p in [state, *state.parents] if home in p.parents), state / "node_id"]:
        os.chown(path, entry.pw_uid, entry.pw_gid)


def test_pairing_adopts_the_id_of_an_agent_already_there_and_a_repair_under_a_new_name_keeps_it(
    ssh_lab_factory, client_key
):
    ssh_lab = ssh_lab_factory(2)
    with_agent, bare = ssh_lab.nodes
    give_agent_id(ssh_lab, with_agent, "5f0c3a9e1d2b4c6a8e7f9a0b1c2d3e4f")
    assert pair(ssh_lab, with_agent, client_key, name="a").node.node_id == "5f0c3a9e1d2b4c6a8e7f9a0b1c2d3e4f"
    assert pair(ssh_lab, bare, client_key, name="b").node.node_id == node_id_from_fingerprint(
        ssh_lab.fingerprint(bare)
    )
    ssh_lab.regenerate_host_key(with_agent)
    repaired = pair(ssh_lab, with_agent, client_key, name="rack-a", repair=True, host=with_agent.ip)
    assert repaired.replaced.name == "a" and repaired.node.name == "rack-a"
    entry = Registry().get("rack-a")
    assert entry.node_id == "5f0c3a9e1d2b4c6a8e7f9a0b1c2d3e4f" and entry.former_names == ["a"]


# --- unpairing ------------------------------------------------------------------------------


def test_unpair_removes_only_our_key_the_entry_and_its_secrets(ssh_lab_factory, client_key):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    mine = b"# laptop\r\n" + f'from="10.0.0.0/8",no-pty {OTHER_KEY}\r\n'.encode()
    path = write_authorized_keys(ssh_lab, node, mine)
    result = pair(ssh_lab, node, client_key, name="n1")
    later = b"# added after pairing\n"
    path.write_bytes(path.read_bytes() + later)
    SecretStore().set(node_secret_name(result.node.node_id, "agent-token"), "token-value")

    done = unpair_node("n1", client_key=client_key, dialer=ssh_lab.dialer, settings=FAST)

    assert done.key_removed and done.secrets_removed == ["agent-token"] and not done.warnings
    assert path.read_bytes() == mine + later
    assert len(Registry()) == 0 and SecretStore().get(node_secret_name(result.node.node_id, "agent-token")) is None
    with pytest.raises(AuthenticationFailedError, match="refused this computer's SparkSync key"):
        key_login(ssh_lab, node, client_key, result.node.host_key)


def test_unpairing_an_unreachable_node_changes_nothing_and_forget_drops_it_here(ssh_lab_factory, client_key):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    pair(ssh_lab, node, client_key, name="n1")
    ssh_lab.set_link(node, up=False)
    with pytest.raises(UnpairError) as caught:
        unpair_node("n1", client_key=client_key, dialer=ssh_lab.dialer, settings=FAST)
    assert "Nothing was changed" in str(caught.value) and "sparksync node unpair n1 --forget" in str(
        caught.value
    )
    assert Registry().names() == ["n1"]
    assert count_key(ssh_lab.authorized_keys_path(node).read_bytes(), client_key.public_line()) == 1

    loaded = []
    done = unpair_node("n1", client_key=lambda: loaded.append(1), forget=True, dialer=ssh_lab.dialer)
    assert done.forgotten_only and not done.key_removed and loaded == []  # no key needed to forget
    assert "still be in" in done.warnings[0] and len(Registry()) == 0


# --- bad input ------------------------------------------------------------------------------


def test_a_wrong_password_is_refused_and_leaves_nothing_behind(ssh_lab_factory, client_key):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    wrong = "not-the-password"
    with pytest.raises(AuthenticationFailedError) as caught:
        pair(ssh_lab, node, client_key, asked=Asked(password=wrong))
    assert "refused the password" in str(caught.value) and wrong not in str(caught.value)
    assert not ssh_lab.authorized_keys_path(node).parent.exists() and len(Registry()) == 0


def test_unreachable_hosts_are_told_apart_and_leave_nothing_behind(ssh_lab_factory, client_key):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    nobody = f"{ssh_lab.lab.subnet}.200"  # on the lab's subnet, but no machine has it
    with pytest.raises(HostUnreachableError) as caught:
        pair(ssh_lab, node, client_key, host=nobody)
    assert f"Cannot reach {nobody} on SSH port 22" in str(caught.value)
    assert "no answer within" in str(caught.value) or "no route to host" in str(caught.value)

    ssh_lab.stop_sshd(node)
    with pytest.raises(HostUnreachableError, match="connection refused"):
        pair(ssh_lab, node, client_key)
    assert len(Registry()) == 0


def test_a_name_that_does_not_resolve_is_reported_as_such(ssh_lab_factory, client_key):
    ssh_lab = ssh_lab_factory(1)
    # Looked up from inside the client namespace: no name server is reachable there, nothing leaves it.
    with pytest.raises(HostNotFoundError, match="cannot resolve host name 'no-such-node.invalid'"):
        pair(ssh_lab, ssh_lab.nodes[0], client_key, host="no-such-node.invalid")
    assert len(Registry()) == 0


def test_two_pairings_of_one_node_from_this_computer_do_not_race(ssh_lab_factory, client_key):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    first_is_inside, second_is_done = threading.Event(), threading.Event()

    class Slow(Asked):
        def confirm(self, fingerprint):  # holds the first pairing inside its critical section
            first_is_inside.set()
            assert second_is_done.wait(20)
            return super().confirm(fingerprint)

    outcome = {}

    def first():
        outcome["first"] = pair(ssh_lab, node, client_key, asked=Slow(), name="n1")

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert first_is_inside.wait(20)
        with pytest.raises(PairingBusyError, match="right now; nothing was changed"):
            pair(ssh_lab, node, client_key, name="n1-again")
    finally:
        second_is_done.set()
        thread.join()
    assert outcome["first"].node.name == "n1" and Registry().names() == ["n1"]
    assert count_key(ssh_lab.authorized_keys_path(node).read_bytes(), client_key.public_line()) == 1


def test_two_computers_pairing_one_node_at_once_both_get_their_key_in(ssh_lab_factory, client_key, tmp_path):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    other_key = ClientKey.load_or_create(SecretStore(service="sparksync-other-computer"), tmp_path / "other")
    both_confirmed = threading.Barrier(2, timeout=20)

    class Together(Asked):
        def confirm(self, fingerprint):  # both log in and edit authorized_keys at the same moment
            both_confirmed.wait()
            return super().confirm(fingerprint)

    jobs = [(client_key, Registry()), (other_key, Registry(tmp_path / "other" / "nodes.json"))]
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(pair, ssh_lab, node, key, registry, Together()) for key, registry in jobs]
        results = [future.result() for future in futures]
    assert all(r.key_installed for r in results)
    content = ssh_lab.authorized_keys_path(node).read_bytes()
    assert (
        count_key(content, client_key.public_line()) == 1 and count_key(content, other_key.public_line()) == 1
    )


# --- transports and tunnels ---------------------------------------------------------------


def test_a_tunnel_reaches_a_nodes_loopback_and_survives_a_cut_link(ssh_lab_factory, client_key, tmp_path):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    pair(ssh_lab, node, client_key, name="n1")
    (tmp_path / "hello.txt").write_text("hello from n1")
    port = 8765
    server = ssh_lab.lab.popen(
        node,
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(tmp_path), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: _listening(node.netns, port), 10, "the node's HTTP server")
    # Bound to the node's loopback: the client namespace cannot reach it directly.
    with pytest.raises(ConnectionRefusedError):
        in_netns(ssh_lab.client.netns, lambda: socket.create_connection((node.ip, port), timeout=2).close())

    states = []
    links = NodeTransports(
        client_key,
        dialer=ssh_lab.dialer,
        settings=LINK,
        backoff=QUICK_RETRY,
        on_status=lambda s: states.append(s.state),
    )
    with links, open_tunnel(links, "n1", port) as tunnel:
        assert _fetch(tunnel.local_port, "/hello.txt") == b"hello from n1"
        first = links.get("n1")
        assert links.get("n1") is first  # one transport per node, reused

        ssh_lab.set_link(node, up=False)
        noticed = wait_for(lambda: links.status("n1").state is LinkState.DOWN, 15, "noticing the cut link")
        wait_for(lambda: links.status("n1").failures >= 2, 15, "retrying while the link is down")
        ssh_lab.set_link(node, up=True)
        back = wait_for(lambda: links.status("n1").state is LinkState.UP, 15, "reconnecting")
        print(f"\ncut link noticed after {noticed:.1f} s; reconnected {back:.1f} s after the link came back")

        assert links.get("n1") is not first and links.status("n1").connects == 2
        assert _fetch(tunnel.local_port, "/hello.txt") == b"hello from n1"  # same tunnel, new transport
    assert states[:2] == [LinkState.UP, LinkState.DOWN] and LinkState.UP in states[2:]
    assert states[-1] is LinkState.CLOSED
    server.terminate()
    server.wait(5)


def _listening(netns: str, port: int) -> bool:
    try:
        in_netns(netns, lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close())
    except OSError:
        return False
    return True


def _fetch(port: int, path: str) -> bytes:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        assert response.status == 200
        return response.read()
    finally:
        connection.close()
