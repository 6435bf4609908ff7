"""Transport supervision without a network: backoff, offline errors, clean close."""

from __future__ import annotations

import threading
import time

import pytest

from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.ssh.errors import HostUnreachableError, NodeOfflineError
from sparksync.core.base.backoff import Backoff
from sparksync.core.ssh.transports import LinkState, NodeTransports
from tests.core.keyring_fixtures import MemoryKeyring
from tests.core.node_factory import paired_node


class CountingDialer:
    """Every dial fails as an unreachable host would; counts the attempts."""

    def __init__(self):
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, host, port, timeout):
        with self.lock:
            self.calls += 1
        raise HostUnreachableError(f"Cannot reach {host} on SSH port {port} (test): it is off.")


@pytest.fixture
def pool_parts(tmp_path):
    key = ClientKey.load_or_create(SecretStore(backend=MemoryKeyring()), tmp_path / "keys")
    registry = Registry(tmp_path / "nodes.json")
    registry.add(paired_node("n1"))
    return key, registry


def test_an_unreachable_node_raises_offline_after_one_attempt_and_keeps_retrying(pool_parts):
    key, registry = pool_parts
    dialer, seen = CountingDialer(), []
    backoff = Backoff(first_s=0.01, max_s=0.02)
    with NodeTransports(key, registry, dialer=dialer, backoff=backoff, on_status=seen.append) as pool:
        started = time.monotonic()
        with pytest.raises(NodeOfflineError) as caught:
            pool.get("n1", timeout=10)
        assert time.monotonic() - started < 5  # one attempt, not the whole timeout
        assert "it is off" in str(caught.value) and "keeps reconnecting" in str(caught.value)
        deadline = time.monotonic() + 5
        while dialer.calls < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert dialer.calls >= 4
        status = pool.status("n1")
        assert status.state is LinkState.DOWN and status.failures >= 3 and status.connects == 0
    assert pool_closed_cleanly(dialer)
    assert seen[0].state is LinkState.DOWN and seen[-1].state is LinkState.CLOSED


def pool_closed_cleanly(dialer: CountingDialer) -> bool:
    calls = dialer.calls
    time.sleep(0.1)
    return dialer.calls == calls  # no attempts after close


def test_an_unknown_node_is_named_and_a_closed_pool_refuses(pool_parts):
    key, registry = pool_parts
    pool = NodeTransports(key, registry, dialer=CountingDialer())
    with pytest.raises(Exception, match="No paired node is named 'nope'"):
        pool.get("nope")
    pool.close()
    with pytest.raises(NodeOfflineError, match="closed"):
        pool.get("n1")
