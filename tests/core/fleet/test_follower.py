"""The follower's resume logic against scripted fake agents: no gap, lost counts, restarts, states."""

from __future__ import annotations

import time

import httpx
import pytest

from sparksync.core.fleet.follower import TelemetryFollower
from sparksync.core.fleet.state import NodeState
from tests.core.fake_agent import lost_event, sample_event
from tests.core.fleet.fakes import FakeFleet


def events(*seqs: int) -> list[bytes]:
    return [sample_event(seq) for seq in seqs]


def wait_until(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.01)


class Recorder:
    def __init__(self):
        self.samples: list[int] = []
        self.states: list[NodeState] = []
        self.lost: list[int] = []
        self.restarts: list[str] = []

    def follower(self, fleet: FakeFleet) -> TelemetryFollower:
        return TelemetryFollower(
            fleet,
            on_sample=lambda name, sample: self.samples.append(sample.seq),
            on_lost=lambda name, lost: self.lost.append(lost),
            on_restart=lambda name, run_id: self.restarts.append(run_id),
        )

    def on_change(self, old, new) -> None:
        self.states.append(new.state)


def test_a_dropped_link_resumes_from_the_last_sequence_without_a_gap(tmp_path):
    seen = Recorder()
    with FakeFleet(tmp_path, ["n1"], on_change=seen.on_change) as fleet:
        link = fleet.fakes["n1"]
        link.link_up = False  # the drop below reads as a cut SSH link
        link.agent.scripts.extend(
            [[*events(1, 2, 3, 4, 5), httpx.ReadError("reset")], events(5, 6, 7, 8, 9, 10)]
        )
        with seen.follower(fleet) as follower:
            wait_until(lambda: follower.position("n1").last_seq == 10, "samples up to 10")
        position = follower.position("n1")
    assert seen.samples == list(range(1, 11))  # 5 came twice from the agent, once to us
    assert position.delivered == 10 and position.lost == 0 and position.run_id == "run-1"
    assert link.agent.stream_requests()[1].url.params["since"] == "5"
    assert seen.states[:3] == [NodeState.ONLINE, NodeState.OFFLINE, NodeState.ONLINE]
    assert link.rereads == [False]  # an SSH cut does not need the agent found again


def test_samples_older_than_the_ring_are_counted_as_lost(tmp_path):
    seen = Recorder()
    with FakeFleet(tmp_path, ["n1"]) as fleet:
        link = fleet.fakes["n1"]
        link.link_up = False
        link.agent.scripts.extend(
            [[*events(1, 2), httpx.ReadError("reset")], [lost_event(6, 2), *events(9, 10)]]
        )
        with seen.follower(fleet) as follower:
            wait_until(lambda: follower.position("n1").last_seq == 10, "samples up to 10")
    assert seen.samples == [1, 2, 9, 10] and seen.lost == [6]
    assert follower.position("n1").lost == 6


def test_an_agent_that_went_away_is_found_again_and_its_restart_noticed(tmp_path):
    seen = Recorder()
    with FakeFleet(tmp_path, ["n1"], on_change=seen.on_change) as fleet:
        link = fleet.fakes["n1"]
        # hello: the follower's, the stream's, then after the drop both see the new run.
        link.agent.run_ids.extend(["run-1", "run-1", "run-2"])
        link.agent.scripts.extend([[*events(1, 2, 3), httpx.ReadError("reset")], events(1, 2)])
        with seen.follower(fleet) as follower:
            wait_until(
                lambda: follower.position("n1").run_id == "run-2" and seen.samples[-1:] == [2], "the new run"
            )
    assert seen.samples == [1, 2, 3, 1, 2] and seen.restarts == ["run-2"]
    assert link.rereads[:2] == [False, True]  # the endpoint was read again
    assert seen.states[:3] == [NodeState.ONLINE, NodeState.DEGRADED, NodeState.ONLINE]
    assert fleet.status(fleet.nodes(["n1"])[0]).last_seen is not None


def test_stop_ends_a_follower_waiting_for_an_offline_node(tmp_path):
    from sparksync.core.fleet.problems import offline

    seen = Recorder()
    with FakeFleet(tmp_path, ["n1"], on_change=seen.on_change) as fleet:
        fleet.fakes["n1"].problem = offline(
            "Cannot reach 10.0.0.1 on SSH port 22 (10.0.0.1: no answer within 2 s)"
        )
        follower = seen.follower(fleet)
        follower.start()
        wait_until(lambda: seen.states == [NodeState.OFFLINE], "the node reported offline")
        follower.stop()
    assert seen.samples == []
