"""The stream's resume, reconnect, lost and restart logic, against a scripted fake."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from sparksync.core.agents.client import AgentClient
from sparksync.core.base.errors import AgentAuthError, AgentRequestError, AgentUnreachableError
from sparksync.core.base.backoff import Backoff
from sparksync.core.agents.stream import Connected, Disconnected, Lost, Restarted
from sparksync_agent.protocol import Sample
from tests.core.conftest import FAST
from tests.core.fake_agent import SilentStreamServer, error, lost_event, sample_event


def take(stream, count: int) -> list:
    """The first ``count`` items of ``stream``, then close it."""
    items = []
    for item in stream:
        items.append(item)
        if len(items) == count:
            break
    stream.close()
    return items


def seqs(items) -> list[int]:
    return [i.seq for i in items if isinstance(i, Sample)]


def test_resumes_after_a_drop_without_gap_or_duplicate(fake, fake_client):
    fake.scripts.append([sample_event(1), sample_event(2), httpx.ReadError("connection reset")])
    fake.scripts.append([sample_event(2), sample_event(3), sample_event(4)])  # the agent repeats 2
    items = take(fake_client.stream(backoff=FAST), 7)
    assert seqs(items) == [1, 2, 3, 4]
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["Connected", "Sample", "Sample", "Disconnected", "Connected", "Sample", "Sample"]
    drop = items[3]
    assert isinstance(drop.error, AgentUnreachableError) and "reset" in str(drop.error)
    second = fake.stream_requests()[1]
    assert second.url.params["since"] == "2" and second.headers["last-event-id"] == "2"


def test_starts_from_the_given_since(fake, fake_client):
    fake.scripts.append([sample_event(6)])
    stream = fake_client.stream(since=5, backoff=FAST)
    assert seqs(take(stream, 2)) == [6]
    assert fake.stream_requests()[0].url.params["since"] == "5"
    assert stream.last_seq == 6


def test_lost_samples_are_surfaced(fake, fake_client):
    fake.scripts.append([lost_event(12, 40), sample_event(53)])
    items = take(fake_client.stream(since=40, backoff=FAST), 3)
    assert items[1] == Lost(lost=12, since=40)
    assert seqs(items) == [53]


def test_new_run_id_restarts_from_zero(fake, fake_client):
    fake.run_ids.append("run-2")  # the second hello sees a restarted agent
    fake.scripts.append([sample_event(7), sample_event(8), httpx.RemoteProtocolError("peer closed")])
    fake.scripts.append([sample_event(1), sample_event(2)])
    items = take(fake_client.stream(backoff=FAST), 8)
    assert isinstance(items[3], Disconnected) and isinstance(items[3].error, AgentUnreachableError)
    assert "peer closed" in str(items[3].error)
    assert items[4] == Restarted(old_run_id="run-1", new_run_id="run-2")
    assert seqs(items) == [7, 8, 1, 2]
    assert fake.stream_requests()[1].url.params["since"] == "0"


@pytest.mark.parametrize("status", [409, 400], ids=["protocol-1.5", "older-agent"])
def test_unknown_since_after_a_quick_restart_starts_over(fake, fake_client, status):
    fake.run_ids.append("run-2")  # the restart lands between our hello and the stream request
    fake.scripts.append(error(status, "unknown_since", "since 9 is newer than seq 0"))
    fake.scripts.append([sample_event(1)])
    stream = fake_client.stream(since=9, run_id="run-1", backoff=FAST)
    items = take(stream, 3)
    assert isinstance(items[0], Restarted) and seqs(items) == [1]
    assert stream.run_id == "run-2"


def test_unknown_since_in_the_same_run_is_the_callers_mistake(fake, fake_client):
    fake.scripts.append(error(409, "unknown_since", "since 9 is newer than seq 3"))
    with pytest.raises(AgentRequestError, match="since 9"):
        take(fake_client.stream(since=9, backoff=FAST), 2)


def test_server_errors_are_retried_with_growing_backoff(fake, fake_client):
    fake.scripts.extend([error(503, "busy", "busy"), error(503, "busy", "busy"), error(503, "busy", "busy")])
    fake.scripts.append([sample_event(1)])
    items = take(fake_client.stream(backoff=Backoff(first_s=0.001, factor=3, max_s=0.005)), 5)
    delays = [i.retry_in for i in items if isinstance(i, Disconnected)]
    assert delays == [0.001, 0.003, 0.005]
    assert seqs(items) == [1]


def test_backoff_resets_after_a_healthy_session(fake, fake_client):
    fake.scripts.append(error(503, "busy", "busy"))
    fake.scripts.append([sample_event(1), httpx.ReadError("drop")])
    fake.scripts.append([sample_event(2)])
    items = take(fake_client.stream(backoff=Backoff(first_s=0.001, factor=4, max_s=1)), 6)
    assert [i.retry_in for i in items if isinstance(i, Disconnected)] == [0.001, 0.001]


def test_a_refused_token_ends_the_stream(fake):
    with AgentClient("http://agent.test", "wrong", transport=fake.transport()) as client:
        with pytest.raises(AgentAuthError):
            take(client.stream(backoff=FAST), 1)


def test_unknown_events_and_pings_are_ignored(fake, fake_client):
    fake.scripts.append([b": ping\n\n", b"event: gossip\ndata: {}\n\n", sample_event(1)])
    assert seqs(take(fake_client.stream(backoff=FAST), 2)) == [1]


def test_close_before_iterating_yields_nothing(fake, fake_client):
    stream = fake_client.stream()
    stream.close()
    assert list(stream) == [] and stream.closed


def test_close_from_another_thread_wakes_a_blocked_read():
    with SilentStreamServer() as server, AgentClient(server.base_url, "t", timeout=5) as client:
        stream = client.stream()
        items = iter(stream)
        assert isinstance(next(items), Connected)
        assert next(items).seq == 1
        closer = threading.Timer(0.2, stream.close)
        started = time.monotonic()
        closer.start()
        rest = list(items)  # blocks on the silent socket until close() shuts it down
        closer.join()
        assert rest == [] and time.monotonic() - started < 3.0


def test_client_close_stops_its_streams():
    with SilentStreamServer() as server:
        client = AgentClient(server.base_url, "t", timeout=5)
        items = iter(client.stream())
        next(items), next(items)
        threading.Timer(0.2, client.close).start()
        assert list(items) == []


def test_samples_skips_the_markers(fake, fake_client):
    fake.scripts.append([lost_event(1, 0), sample_event(2), httpx.ReadError("drop")])
    fake.scripts.append([sample_event(3)])
    stream = fake_client.stream(backoff=FAST)
    got = []
    for sample in stream.samples():
        got.append(sample.seq)
        if len(got) == 2:
            break
    stream.close()
    assert got == [2, 3]
