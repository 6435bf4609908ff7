from __future__ import annotations

import pytest

from sparksync_agent.ring import SampleRing, UnknownSinceError
from sparksync_agent.sampler import ring_capacity


def _filled(capacity: int, count: int) -> SampleRing:
    ring = SampleRing(capacity)
    for seq in range(1, count + 1):
        ring.append(seq, b"%d" % seq)
    return ring


def test_since_returns_newer_samples_in_order():
    items, lost = _filled(10, 5).since(2)
    assert [seq for seq, _ in items] == [3, 4, 5] and lost == 0
    assert [data for _, data in items] == [b"3", b"4", b"5"]


def test_since_older_than_the_ring_reports_what_was_lost():
    ring = _filled(4, 10)  # holds 7..10
    items, lost = ring.since(2)
    assert [seq for seq, _ in items] == [7, 8, 9, 10]
    assert lost == 4  # 3, 4, 5 and 6 are gone


def test_limit_and_the_newest_seq():
    ring = _filled(10, 6)
    assert [seq for seq, _ in ring.since(0, limit=2)[0]] == [1, 2]
    assert ring.since(6) == ([], 0)


@pytest.mark.parametrize("since", [-1, 7])
def test_unknown_since_is_an_error(since):
    with pytest.raises(UnknownSinceError):
        _filled(10, 6).since(since)


def test_sequence_must_be_contiguous():
    ring = _filled(3, 2)
    with pytest.raises(ValueError):
        ring.append(5, b"x")


def test_capacity_covers_at_least_ten_minutes():
    for hz in (1, 2.5, 10):
        assert ring_capacity(hz) >= hz * 600
