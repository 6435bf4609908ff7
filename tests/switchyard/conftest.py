"""Fixtures for Switchyard tests: scripted fake replicas and gateways, each stopped at teardown."""

from __future__ import annotations

from typing import Any

import pytest

from sparksync.switchyard.config import SwitchyardConfig, parse_config
from sparksync.switchyard.server import GatewayThread
from tests.engines.engine_procs import free_port
from tests.switchyard.fakes import FakeReplica, Reply


def config_for(
    small: list[str], large: list[str], policy: dict[str, Any] | None = None, **sections: Any
) -> SwitchyardConfig:
    """A config with pools "small" and "large" and fast health checks."""
    data: dict[str, Any] = {
        "listen": {"host": "127.0.0.1", "port": 0},
        "pools": {
            "small": {"urls": small, "model": "small-model"},
            "large": {"urls": large, "model": "large-model"},
        },
        "policy": {
            "small": "small",
            "large": "large",
            **(policy or {"kind": "fixed_share", "large_share": 0}),
        },
        "health": {"interval_s": 0.2, "timeout_s": 0.5},
    }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return parse_config(data)


def dead_url() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def _servers():
    """Every server a test started; all are asked to stop at once, then awaited (faster teardown)."""
    started: list[FakeReplica | GatewayThread] = []
    yield started
    for server in reversed(started):
        server.request_stop()
    for server in reversed(started):
        server.stop()


@pytest.fixture
def fake(_servers):
    def make(name: str, script: dict[str, Reply] | None = None, default: Reply | None = None) -> FakeReplica:
        replica = FakeReplica(name, script, default)
        _servers.append(replica)
        return replica.start()

    return make


@pytest.fixture
def gateway(_servers):
    def make(config: SwitchyardConfig) -> GatewayThread:
        thread = GatewayThread(config)
        _servers.append(thread)
        return thread.start()

    return make


# The engine fixtures live in tests/engines/conftest.py; importing them makes them visible to these tests.
from tests.engines.conftest import (  # noqa: F401
    _tiny_models_dir,
    _tiny_tokenizer,
    llama_binaries,
    tiny_model,
    tiny_model_large,
)
from tests.switchyard.llama import replicas


@pytest.fixture(scope="module")
def small_replicas(llama_binaries, tiny_model, tmp_path_factory):  # noqa: F811
    """Two replicas of the small tiny model, shared by a module's tests."""
    with replicas(llama_binaries, tiny_model, tmp_path_factory.mktemp("small-logs"), 2) as servers:
        yield servers


@pytest.fixture(scope="module")
def large_replica(llama_binaries, tiny_model_large, tmp_path_factory):  # noqa: F811
    """One replica of the large tiny model (~10-25x slower)."""
    with replicas(llama_binaries, tiny_model_large, tmp_path_factory.mktemp("large-logs"), 1) as servers:
        yield servers[0]
