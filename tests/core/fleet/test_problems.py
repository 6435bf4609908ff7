"""Offline causes read from the SSH layer's own messages."""

from __future__ import annotations

import errno

import pytest

from sparksync.core.fleet.problems import DEGRADED_EXIT, OFFLINE_EXIT, degraded, offline, offline_cause
from sparksync.core.fleet.state import Cause, NodeState
from sparksync.core.nodes.registry import HostKeyChangedError, PinnedHostKey
from sparksync.core.ssh.connection import unreachable_message
from sparksync.core.ssh.hostkeys import changed_key_message
from tests.core.node_factory import host_pkey


def _changed_key_messages() -> list[str]:
    pinned = PinnedHostKey.from_pkey(host_pkey())
    with pytest.raises(HostKeyChangedError) as caught:
        pinned.verify(host_pkey(), "n1")
    return [str(caught.value), changed_key_message("n1", "10.0.0.1", pinned, host_pkey())]


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        (
            unreachable_message("10.0.0.1", 22, [("10.0.0.1", ConnectionRefusedError(111, "x"))], 2),
            Cause.REFUSED,
        ),
        (unreachable_message("10.0.0.1", 22, [("10.0.0.1", TimeoutError("timed out"))], 2), Cause.TIMEOUT),
        (
            unreachable_message("10.0.0.1", 22, [("10.0.0.1", OSError(errno.EHOSTUNREACH, "x"))], 2),
            Cause.NO_ROUTE,
        ),
        ("connection lost (closed by the node, or no answer to keepalives)", Cause.CONNECTION_LOST),
        ("something nobody expected", Cause.UNREACHABLE),
    ],
)
def test_transport_reasons_map_to_causes(message, cause):
    assert offline_cause(message) is cause


def test_a_changed_host_key_is_its_own_cause():
    for message in _changed_key_messages():
        problem = offline(message)
        assert (problem.state, problem.cause, problem.exit_code) == (
            NodeState.OFFLINE, Cause.HOST_KEY_CHANGED, OFFLINE_EXIT,
        )  # fmt: skip


def test_degraded_problems_carry_their_cause_and_exit_status():
    problem = degraded(Cause.AGENT_NOT_RUNNING, "not running")
    assert (problem.state, problem.cause, str(problem), problem.exit_code) == (
        NodeState.DEGRADED, Cause.AGENT_NOT_RUNNING, "not running", DEGRADED_EXIT,
    )  # fmt: skip
