"""The follower's resume logic against scripted fake agents: no gap, lost counts, restarts, states."""

from __future__ import annotations

import time

import httpx
import pytest

from sparksync.core.base.backoff import Backoff
from sparksync.core.fleet.follower import Gap, Live, SampleIn, TelemetryFollower, Trouble
from sparksync.core.fleet.state import NodeState
from tests.core.fake_agent import lost_event, make_sample, sample_event
from tests.core.fleet.fakes import FakeFleet

QUICK = Backoff(first_s=0.01, factor=2.0, max_s=0.02)


def events(*seqs: int) -> list[bytes]:
    return [sample_event(seq) for seq in seqs]


def later_run(*seqs: int, after: float = 100.0) -> list[bytes]:
    """Samples of a restarted agent: their sequence starts over, their clock does not."""
    shifted = [make_sample(seq).model_copy(update={"ts": make_sample(seq).ts + after}) for seq in seqs]
    return [b"id: %d\nevent: sample\ndata: %s\n\n" % (s.seq, s.model_dump_json().encode()) for s in shifted]


def wait_until(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.01)


class Recorder:
    def __init__(self):
        self.events: list = []
        self.states: list[NodeState] = []

    @property
    def samples(self) -> list[int]:
        return [e.sample.seq for e in self.events if isinstance(e, SampleIn)]

    def of(self, kind) -> list:
        return [e for e in self.events if isinstance(e, kind)]

    def follower(self, fleet: FakeFleet) -> TelemetryFollower:
        return TelemetryFollower(fleet, list(fleet.fakes), on_event=self.events.append)

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
    assert seen.of(Gap) == []  # nothing was missed, so the timeline shows no gap
    assert seen.of(Trouble)[0].problem.state is NodeState.OFFLINE


def test_samples_older_than_the_ring_are_counted_as_lost_and_leave_a_gap(tmp_path):
    seen = Recorder()
    with FakeFleet(tmp_path, ["n1"]) as fleet:
        link = fleet.fakes["n1"]
        link.link_up = False
        link.agent.scripts.extend(
            [[*events(1, 2), httpx.ReadError("reset")], [lost_event(6, 2), *events(9, 10)]]
        )
        with seen.follower(fleet) as follower:
            wait_until(lambda: follower.position("n1").last_seq == 10, "samples up to 10")
    assert seen.samples == [1, 2, 9, 10]
    assert follower.position("n1").lost == 6
    [gap] = seen.of(Gap)
    times = {e.sample.seq: e.sample.ts for e in seen.of(SampleIn)}
    assert (gap.start, gap.end) == (times[2], times[9]) and "6 samples were lost" in gap.reason


def test_an_agent_that_went_away_is_found_again_its_restart_noticed_and_the_gap_marked(tmp_path):
    seen = Recorder()
    with FakeFleet(tmp_path, ["n1"], on_change=seen.on_change) as fleet:
        link = fleet.fakes["n1"]
        # hello: the follower's, the stream's, then after the drop both see the new run.
        link.agent.run_ids.extend(["run-1", "run-1", "run-2"])
        link.agent.scripts.extend([[*events(1, 2, 3), httpx.ReadError("reset")], later_run(1, 2)])
        with seen.follower(fleet) as follower:
            wait_until(
                lambda: follower.position("n1").run_id == "run-2" and seen.samples[-1:] == [2], "the new run"
            )
    assert seen.samples == [1, 2, 3, 1, 2]
    assert [e.run_id for e in seen.of(Live)] == ["run-1", "run-2"]
    assert link.rereads[:2] == [False, True]  # the endpoint was read again
    assert seen.states[:3] == [NodeState.ONLINE, NodeState.DEGRADED, NodeState.ONLINE]
    assert fleet.status(fleet.nodes(["n1"])[0]).last_seen is not None
    # The time the agent was away is one gap: from the old run's last sample to the new run's first.
    samples = seen.of(SampleIn)
    [gap] = seen.of(Gap)
    assert (gap.start, gap.end, gap.reason) == (samples[2].sample.ts, samples[3].sample.ts, "the agent restarted")
    assert seen.events.index(gap) == seen.events.index(samples[3]) - 1  # told before the new run's samples


def test_a_failure_that_repeats_is_told_once_and_stop_ends_the_wait(tmp_path):
    from sparksync.core.fleet.problems import offline

    seen = Recorder()
    with FakeFleet(tmp_path, ["n1"], on_change=seen.on_change) as fleet:
        fleet.fakes["n1"].problem = offline(
            "Cannot reach 10.0.0.1 on SSH port 22 (10.0.0.1: no answer within 2 s)"
        )
        follower = TelemetryFollower(fleet, ["n1"], on_event=seen.events.append, retry=QUICK)
        follower.start()
        wait_until(lambda: len(fleet.fakes["n1"].rereads) >= 4, "several retries")
        follower.stop()
    assert seen.states == [NodeState.OFFLINE] and seen.samples == []
    assert [t.message for t in seen.of(Trouble)] == [
        "n1: Cannot reach 10.0.0.1 on SSH port 22 (10.0.0.1: no answer within 2 s)"
    ]


def test_retry_now_cuts_a_long_backoff_short_once_the_agent_is_there(tmp_path):
    from sparksync.core.fleet.problems import offline

    seen = Recorder()
    slow = Backoff(first_s=600.0, factor=1.0, max_s=600.0)  # without retry_now: ten minutes to the next try
    with FakeFleet(tmp_path, ["n1"], on_change=seen.on_change) as fleet:
        link = fleet.fakes["n1"]
        link.problem = offline("no agent yet")
        link.agent.scripts.append(events(1, 2))
        follower = TelemetryFollower(fleet, ["n1"], on_event=seen.events.append, retry=slow)
        follower.start()
        wait_until(lambda: len(link.rereads) >= 1 and seen.of(Trouble), "the first failed attempt")
        link.problem = None  # the agent was just deployed
        assert follower.retry_now("n1") and not follower.retry_now("n2")
        wait_until(lambda: seen.samples == [1, 2], "the samples after retry_now", timeout=20)
        follower.stop()
    assert seen.of(Live)
