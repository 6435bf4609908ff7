"""Fixtures for the client core: a real local agent and a scripted fake."""

from __future__ import annotations

import pytest

from sparksync.core.agents.client import AgentClient
from sparksync.core.agents.local import LocalAgent
from sparksync.core.base.backoff import Backoff
from tests.core.fake_agent import GOOD_TOKEN, FakeAgent

FAST = Backoff(first_s=0.001, factor=2.0, max_s=0.004)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKSYNC_HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
def local_agent(home):
    """A real agent at 10 Hz, started through LocalAgent and stopped at teardown."""
    agent = LocalAgent(home / "state", sample_hz=10).start()
    yield agent
    agent.stop()


@pytest.fixture
def client(local_agent):
    with local_agent.client() as client:
        yield client


@pytest.fixture
def fake():
    return FakeAgent()


@pytest.fixture
def fake_client(fake):
    with AgentClient("http://agent.test", GOOD_TOKEN, transport=fake.transport()) as client:
        yield client
