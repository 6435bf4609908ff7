"""AgentClient and LocalAgent against a real ``sparksync_agent serve`` process."""

from __future__ import annotations

import os
import signal
import socket
import time

import psutil
import pytest

from sparksync.core.agents.client import AgentClient
from sparksync.core.base.errors import AgentAuthError, AgentRequestError, AgentUnreachableError
from sparksync.core.agents.stream import Connected, Disconnected
from sparksync_agent.protocol import PROTOCOL_VERSION, Sample, protocol_major
from sparksync_agent.state import read_endpoint, read_token
from tests.core.conftest import FAST
from tests.machine import mem_total_bytes


def wait_for_seq(client: AgentClient, seq: int, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while (last := client.status().last_seq) < seq:
        assert time.monotonic() < deadline, f"the agent never reached seq {seq} (at {last})"
        time.sleep(0.05)
    return last


def samples_of(stream, count: int) -> list[Sample]:
    got = []
    for item in stream:
        if isinstance(item, Sample):
            got.append(item)
            if len(got) == count:
                break
    stream.close()
    return got


def test_hello_names_the_running_agent(local_agent, client):
    reply = client.hello()
    assert reply.run_id == local_agent.endpoint.run_id
    assert protocol_major(reply.protocol_version) == protocol_major(PROTOCOL_VERSION)
    assert reply.sample_hz == 10


def test_snapshot_describes_this_machine(client):
    wait_for_seq(client, 1)
    snap = client.snapshot()
    assert snap.info.hostname == socket.gethostname()
    assert snap.latest is not None and snap.latest.memory.total_bytes == mem_total_bytes()
    assert client.status().node_id == snap.info.node_id


def test_telemetry_since_is_contiguous(client):
    wait_for_seq(client, 4)
    page = client.telemetry(0)
    seqs = [s.seq for s in page.samples]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) and len(seqs) >= 4
    later = client.telemetry(seqs[1], limit=2)
    assert [s.seq for s in later.samples] == seqs[2:4]
    assert later.run_id == page.run_id


def test_since_beyond_the_newest_is_refused(client):
    last = wait_for_seq(client, 1)
    with pytest.raises(AgentRequestError) as info:
        client.telemetry(last + 10_000)
    assert info.value.status == 409 and info.value.code == "unknown_since"


def test_metrics_need_and_accept_the_token(client):
    assert "sparksync_" in client.metrics()


def test_stream_resumes_with_no_gap_after_a_reconnect(client):
    first = samples_of(client.stream(since=0), 3)
    run_id = client.hello().run_id
    wait_for_seq(client, first[-1].seq + 3)  # samples keep coming while we are away
    second = samples_of(client.stream(since=first[-1].seq, run_id=run_id), 5)
    seqs = [s.seq for s in first + second]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


def test_wrong_token_is_refused(local_agent):
    real_token = read_token(local_agent.state_dir)
    with AgentClient(local_agent.base_url, "wrong-token-123") as bad:
        with pytest.raises(AgentAuthError) as info:
            bad.hello()
        with pytest.raises(AgentAuthError):
            bad.snapshot()
    assert "wrong-token-123" not in str(info.value) and real_token not in str(info.value)


def test_proxy_settings_never_capture_loopback(local_agent, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "")
    with AgentClient(local_agent.base_url, read_token(local_agent.state_dir)) as fresh:
        assert fresh.hello().run_id


def test_stream_reports_a_killed_agent(local_agent, client):
    stream = client.stream(backoff=FAST)
    items = iter(stream)
    assert isinstance(next(items), Connected)
    os.kill(local_agent.pid, signal.SIGKILL)
    for item in items:
        if isinstance(item, Disconnected):
            assert isinstance(item.error, AgentUnreachableError)
            break
    stream.close()
    deadline = time.monotonic() + 5  # the socket closes a moment before the process is reaped
    while local_agent.is_alive():
        assert time.monotonic() < deadline, "the killed agent still looks alive"
        time.sleep(0.02)


def test_stop_leaves_no_process(home):
    from sparksync.core.agents.local import LocalAgent

    agent = LocalAgent(home / "state", sample_hz=10).start()
    pid = agent.pid
    assert agent.owned and psutil.pid_exists(pid)
    agent.stop()
    assert not psutil.pid_exists(pid)
    assert read_endpoint(home / "state") is None
    agent.stop()  # a second stop is harmless


def test_attaches_instead_of_starting_a_second_agent(local_agent):
    from sparksync.core.agents.local import LocalAgent

    with LocalAgent(local_agent.state_dir) as second:
        assert not second.owned and second.pid == local_agent.pid
        with second.client() as client:
            assert client.hello().run_id == local_agent.endpoint.run_id
    assert local_agent.is_alive()  # the attached one did not stop what it did not start


def test_default_state_dir_is_the_clients_data_dir(home):
    from sparksync.core.agents.local import LocalAgent

    with LocalAgent(sample_hz=10) as agent:
        assert agent.state_dir == home / "data" / "local-agent"
        assert (home / "data" / "local-agent" / "endpoint.json").exists()
        assert (home / "logs" / "local-agent.log").exists()


def test_an_agent_that_dies_at_start_says_why(home):
    from sparksync.core.base.errors import LocalAgentError
    from sparksync.core.agents.local import LocalAgent

    (home / "blocker").write_text("a file where the state dir should be")
    with pytest.raises(LocalAgentError) as info:
        LocalAgent(home / "blocker" / "state").start()
    message = str(info.value)
    assert "exited with code" in message and "local-agent.log" in message
    assert "state" in message.split("last lines:", 1)[1]  # the agent's own explanation is quoted


def test_a_cancelled_start_leaves_nothing(home):
    import threading

    from sparksync.core.base.errors import LocalAgentCancelled
    from sparksync.core.agents.local import LocalAgent

    cancel = threading.Event()
    cancel.set()
    agent = LocalAgent(home / "state")
    with pytest.raises(LocalAgentCancelled):
        agent.start(cancel)
    assert not agent.owned and not psutil.Process().children(recursive=True)
