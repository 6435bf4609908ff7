"""Fixtures that run a real ``sparksync-agent serve`` process on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.agentproc import RunningAgent, start_agent


@pytest.fixture
def agent_factory(tmp_path):
    """Start real agents; every one is stopped at teardown, even on failure."""
    started: list[RunningAgent] = []

    def make(*extra: str, state_dir: Path | None = None) -> RunningAgent:
        state = state_dir or tmp_path / f"state{len(started)}"
        agent = start_agent(state, tmp_path / f"agent{len(started)}.log", *extra)
        started.append(agent)
        return agent

    yield make
    for agent in started:
        agent.stop()


@pytest.fixture
def agent(agent_factory) -> RunningAgent:
    return agent_factory("--sample-hz", "10")
