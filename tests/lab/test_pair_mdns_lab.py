"""`sparksync node pair` cross-checks a typed host's key with its mDNS advertisement.

A real sshd in a lab node, and in the same node a real `_sparksync._tcp`
advertisement (the agent's own Advertiser) naming a host-key fingerprint.
The CLI runs as its own process in the client namespace and is given only
the node's address, as a user would type it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.sshd import PASSWORD

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
IMPOSTOR_FP = "SHA256:" + ("impostor" * 6)[:43]

ADVERTISE = """
import asyncio, signal, sys
from sparksync_agent import protocol
from sparksync_agent.advertise import Advertiser
ip, host, fp = sys.argv[1:4]

async def main():
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    info = protocol.NodeInfo(node_id=host + "-node-id", hostname=host, arch="aarch64", os="Linux",
                             kernel="lab", cpu_count=20, boot_time=0.0,
                             ssh_host_key_fingerprints={"ssh-ed25519": fp})
    advertiser = Advertiser(info, 128 * 10**9, [ip])
    await advertiser.start()
    print("ready", flush=True)
    await stop.wait()
    await advertiser.stop()

asyncio.run(main())
"""


def _advertise(ssh_lab, node, fingerprint: str) -> subprocess.Popen:
    argv = [sys.executable, "-c", ADVERTISE, node.ip, f"spark-{node.index:04d}", fingerprint]
    proc = ssh_lab.lab.popen(node, argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = ssh_lab.lab.read_line(proc, 20)
    assert line == "ready\n", proc.stderr.read1().decode() if proc.poll() is not None else line
    time.sleep(1.1)  # past the announcements' one-second rate limit, as on a network up a while
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)


def _pair(ssh_lab, env, node, *extra: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "sparksync", "node", "pair", node.ip, "--user", ssh_lab.user(node),
            "--password-stdin", "--name", "n1", "--interface", ssh_lab.client.ip, *extra]  # fmt: skip
    return ssh_lab.lab.exec(ssh_lab.client, argv, input=PASSWORD + "\n", env=env, cwd=REPO)


@pytest.fixture
def env(real_keyring):  # noqa: F811
    env = {**os.environ, **real_keyring.env}
    env.pop("PYTHON_KEYRING_BACKEND", None)
    return env


def test_a_typed_host_whose_advertisement_names_another_key_is_not_paired(ssh_lab_factory, env):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    presented = ssh_lab.fingerprint(node)
    advertiser = _advertise(ssh_lab, node, IMPOSTOR_FP)
    try:
        # --accept-host-key with the presented key does not get past the mismatch...
        refused = _pair(ssh_lab, env, node, "--accept-host-key", presented)
        assert refused.returncode == 13, refused.stderr
        assert "possible impostor" in refused.stderr
        assert presented in refused.stderr and IMPOSTOR_FP in refused.stderr
        assert f"--accept-advertised-mismatch {presented}" in refused.stderr  # what to do
        assert not ssh_lab.authorized_keys_path(node).parent.exists()  # nothing changed on the node
        listed = ssh_lab.lab.exec(ssh_lab.client, [sys.executable, "-m", "sparksync", "node", "list", "--json"],
                                  env=env, cwd=REPO)  # fmt: skip
        assert json.loads(listed.stdout) == {"nodes": []}

        # ...nor does naming any key but the presented one as the mismatch to accept.
        other = _pair(ssh_lab, env, node, "--accept-host-key", presented, "--accept-advertised-mismatch", IMPOSTOR_FP)
        assert other.returncode == 13 and "possible impostor" in other.stderr

        # Naming the presented key (checked on the node's console) pairs it, and says so.
        named = _pair(ssh_lab, env, node, "--accept-host-key", presented, "--accept-advertised-mismatch", presented)
        assert named.returncode == 0, named.stderr
        assert "differs from its mDNS advertisement; accepted as you named it" in named.stderr
    finally:
        _stop(advertiser)


def test_a_typed_host_whose_advertisement_matches_pairs_and_says_it_matched(ssh_lab_factory, env):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    presented = ssh_lab.fingerprint(node)
    advertiser = _advertise(ssh_lab, node, presented)
    try:
        paired = _pair(ssh_lab, env, node, "--accept-host-key", presented)
    finally:
        _stop(advertiser)
    assert paired.returncode == 0, paired.stderr
    assert "matches what it advertises over mDNS" in paired.stderr


def test_a_host_without_an_advertisement_pairs_on_the_users_check_alone(ssh_lab_factory, env):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    paired = _pair(ssh_lab, env, node, "--accept-host-key", ssh_lab.fingerprint(node))
    assert paired.returncode == 0, paired.stderr
    assert "advertises no host key over mDNS" in paired.stderr


def test_a_ninth_node_is_refused_with_its_own_exit_code_and_nothing_changes_on_it(ssh_lab_factory, env):
    from sparksync.core.nodes.registry import MAX_NODES, Registry
    from tests.core.node_factory import paired_node

    registry = Registry()
    for index in range(1, MAX_NODES + 1):
        registry.add(paired_node(f"spark-{index:04d}", index))
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]

    refused = _pair(ssh_lab, env, node, "--accept-host-key", ssh_lab.fingerprint(node))

    assert refused.returncode == 17, refused.stderr  # docs/exit-codes.md: the cluster is full
    assert f"SparkSync manages at most {MAX_NODES}" in refused.stderr and "sparksync node unpair" in refused.stderr
    assert not ssh_lab.authorized_keys_path(node).parent.exists()  # our key was never installed
    assert len(Registry()) == MAX_NODES
