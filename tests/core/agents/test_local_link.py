"""This computer through its local link: started on first use, found again after a crash, attached to, named."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from sparksync.core.agents import LOCAL_NODE_NAME, LocalAgent, LocalLink, canonical_name, is_local
from sparksync.core.base.errors import AgentUnreachableError, LocalAgentError
from sparksync.core.fleet.problems import NodeProblem
from sparksync.core.fleet.state import Cause, NodeState


@pytest.mark.parametrize("name", ["local", "LOCAL", "this computer", "This  Computer", " local ", "this-computer"])
def test_local_and_this_computer_name_one_node(name):
    assert is_local(name) and canonical_name(name) == LOCAL_NODE_NAME


@pytest.mark.parametrize("name", ["spark-1", "localhost", "local-1", "this-computer-2"])
def test_other_names_are_their_own(name):
    assert not is_local(name) and canonical_name(name) == name


def test_the_link_starts_an_agent_on_first_use_and_stops_it_on_close(home):
    link = LocalLink(home / "state", sample_hz=10)
    assert link.agent is None  # nothing started before the first call
    hello = link.call(lambda client: client.hello())
    agent = link.agent
    assert agent is not None and agent.owned and hello.run_id == agent.endpoint.run_id
    assert link.kind == "local" and link.reachable()
    pid = agent.pid
    link.close()
    assert not psutil.pid_exists(pid)
    with pytest.raises(NodeProblem, match="closed"):
        link.open()


def test_a_call_that_meets_a_dead_agent_starts_a_new_one_and_succeeds(home):
    link = LocalLink(home / "state", sample_hz=10)
    try:
        first = link.call(lambda client: client.hello()).run_id
        os.kill(link.agent.pid, signal.SIGKILL)
        second = link.call(lambda client: client.hello()).run_id  # one retry, after finding the agent again
        assert second != first and link.agent.is_alive()
    finally:
        link.close()


def test_an_agent_already_running_is_attached_to_and_left_running(home, local_agent):
    link = LocalLink(local_agent.state_dir)
    assert link.call(lambda client: client.hello()).run_id == local_agent.endpoint.run_id
    assert not link.agent.owned
    link.close()
    assert local_agent.is_alive()  # only an agent the link started is stopped


def test_problems_read_as_this_computers_with_a_cause(home):
    link = LocalLink(home / "state")
    problem = link.explain(LocalAgentError("the local agent exited with code 2 before it was ready."))
    assert (problem.state, problem.cause) == (NodeState.DEGRADED, Cause.AGENT_NOT_RUNNING)
    assert "exited with code 2" in problem.reason
    gone = link.explain(AgentUnreachableError("the agent at http://127.0.0.1:1 did not answer"))
    assert gone.state is NodeState.DEGRADED and "did not answer" in gone.reason  # never offline: it is here


def test_a_local_agent_started_by_the_client_finds_the_engine_cache_on_its_path(home):
    from sparksync.core.engines import bin_dirs

    agent = LocalAgent(home / "state").start()
    try:
        path = psutil.Process(agent.pid).environ()["PATH"].split(os.pathsep)
        assert all(str(d) in path for d in bin_dirs())
    finally:
        agent.stop()
