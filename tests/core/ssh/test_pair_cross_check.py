"""The app's pairing of a typed host goes through the same mDNS cross-check as the CLI's (real sshd on loopback)."""

from __future__ import annotations

import time

import pytest

from sparksync.core.discovery import DiscoveredNode, Discovery
from sparksync.core.nodes import ClusterActions
from sparksync.core.ssh.errors import HostKeyMismatchError
from sparksync.core.ssh.pairing import PairRequest
from tests.core.keyring_fixtures import MemoryKeyring, global_keyring
from tests.core.ssh.test_ssh_config import loopback_sshd  # noqa: F401  (a fixture)

OTHER_FP = "SHA256:" + "Z" * 43


def test_a_typed_host_is_checked_against_what_the_apps_discovery_saw(loopback_sshd):  # noqa: F811
    discovery = Discovery(["127.0.0.1"])  # never started: the table the app's discovery filled
    discovery.add(DiscoveredNode(
        key="host:spark-0001", hostname="spark-0001", addresses=["127.0.0.1"], kind="agent",
        host_key_fingerprints={"ssh-ed25519": OTHER_FP}, sources=["sparksync"], last_seen=time.time(),
    ))  # fmt: skip
    actions = ClusterActions()
    actions.discovery = discovery
    asked: list[str] = []
    with global_keyring(MemoryKeyring()), pytest.raises(HostKeyMismatchError) as caught:
        actions.pair(
            PairRequest("127.0.0.1", "root", port=loopback_sshd.port),
            password=lambda: asked.append("password") or "unused",
            confirm=lambda fp: asked.append(fp) or True,
            progress=lambda _line: None,
        )
    assert asked == []  # stopped before the user was asked anything
    message = str(caught.value)
    assert loopback_sshd.host_key.fingerprint in message and OTHER_FP in message
    assert f"--accept-advertised-mismatch {loopback_sshd.host_key.fingerprint}" in message
    actions.close()
