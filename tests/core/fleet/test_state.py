"""The node state machine: the transition table, refused moves, since and last-seen."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from sparksync.core.fleet.state import (
    TRANSITIONS,
    Cause,
    IllegalTransitionError,
    NodeState,
    StateTracker,
    check_transition,
    is_change,
)

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=timezone.utc)
S = NodeState


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_happy_path_is_allowed_step_by_step():
    tracker = StateTracker.new("n1", S.DISCOVERED)
    for state in (S.PAIRING, S.PAIRED, S.DEPLOYING, S.ONLINE, S.OFFLINE, S.ONLINE, S.DEGRADED, S.DEPLOYING):
        tracker.move(state)
    assert tracker.status.state is S.DEPLOYING


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (S.DISCOVERED, S.ONLINE),  # never paired
        (S.DISCOVERED, S.PAIRED),  # skipped the pairing
        (S.PAIRING, S.ONLINE),
        (S.PAIRING, S.DEPLOYING),
        (S.DEPLOYING, S.PAIRING),  # re-pair in the middle of a deploy
        (S.ONLINE, S.DISCOVERED),
        (S.OFFLINE, S.PAIRED),
    ],
)
def test_moves_missing_from_the_table_are_refused_and_change_nothing(old, new):
    tracker = StateTracker.new("n1", old)
    before = tracker.status
    with pytest.raises(IllegalTransitionError) as caught:
        tracker.move(new, Cause.TIMEOUT, "why")
    assert f"cannot go from {old.value} to {new.value}" in str(caught.value)
    assert tracker.status == before


def test_every_state_has_a_row_and_every_live_state_can_be_redeployed():
    assert set(TRANSITIONS) == set(S)
    for state in (S.ONLINE, S.OFFLINE, S.DEGRADED, S.PAIRED):
        check_transition("n1", state, S.DEPLOYING)
    for state in S:
        check_transition("n1", state, state)  # staying put is always fine


def test_since_moves_with_the_state_and_last_seen_only_when_reached():
    tracker = StateTracker.new("n1")
    tracker.move(S.ONLINE, now=at(1))
    assert tracker.status.since == at(1) and tracker.status.last_seen == at(1)
    old, new = tracker.move(S.ONLINE, now=at(5))  # still online: since stays, seen again
    assert new.since == at(1) and new.last_seen == at(5) and not is_change(old, new)
    old, new = tracker.move(S.OFFLINE, Cause.TIMEOUT, "no answer within 2 s", now=at(9))
    assert is_change(old, new)
    assert (new.state, new.cause, new.reason) == (S.OFFLINE, Cause.TIMEOUT, "no answer within 2 s")
    assert new.since == at(9) and new.last_seen == at(5)  # not seen while offline
    old, new = tracker.move(S.OFFLINE, Cause.REFUSED, "connection refused", now=at(12))
    assert is_change(old, new) and new.since == at(9)  # another cause is news, not another state
    _, new = tracker.move(S.DEGRADED, Cause.AGENT_NOT_RUNNING, "agent down", now=at(20))
    assert new.last_seen == at(20) and new.reachable  # SSH answered
    assert tracker.seen(at(21)).last_seen == at(21)
