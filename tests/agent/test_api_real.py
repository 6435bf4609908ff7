"""The agent's API through a real agent process on loopback."""

from __future__ import annotations

import json
import threading
import time

import httpx
from httpx_sse import connect_sse

from sparksync_agent.protocol import PROTOCOL_VERSION, AgentStatus, ErrorBody, HelloReply, Sample, Snapshot, TelemetryPage


def _read_samples(client: httpx.Client, count: int, **params) -> tuple[list[Sample], list[dict]]:
    samples, lost = [], []
    with connect_sse(client, "GET", "/v1/telemetry/stream", params=params) as source:
        for event in source.iter_sse():
            if event.event == "lost":
                lost.append(json.loads(event.data))
                continue
            sample = Sample.model_validate_json(event.data)
            assert event.id == str(sample.seq)
            samples.append(sample)
            if len(samples) == count:
                break
    return samples, lost


def test_every_route_needs_the_token(agent):
    paths = ["/v1/snapshot", "/v1/status", "/v1/telemetry", "/metrics", "/openapi.json", "/v1/telemetry/stream"]
    for token in ("", "wrong-token"):
        with agent.client(token=token) as client:
            for path in paths:
                response = client.get(path)
                assert response.status_code == 401, path
                body = ErrorBody.model_validate(response.json())
                assert body.error == "unauthorized"
                assert "hostname" not in response.text and agent.token not in response.text
            assert client.post("/v1/hello", json={}).status_code == 401


def test_hello_snapshot_status(agent):
    with agent.client() as client:
        reply = HelloReply.model_validate(client.post("/v1/hello", json={"protocol_version": PROTOCOL_VERSION}).json())
        snap = Snapshot.model_validate(client.get("/v1/snapshot").json())
        status = AgentStatus.model_validate(client.get("/v1/status").json())
    assert reply.protocol_version == PROTOCOL_VERSION and reply.sample_hz == 10
    assert snap.info.node_id == reply.node_id == status.node_id
    assert snap.run_id == reply.run_id == status.run_id
    assert snap.latest is not None and snap.latest.memory.total_bytes > 0
    assert status.pid == agent.proc.pid
    assert status.ring_capacity >= 10 * 600


def test_incompatible_major_names_both_versions(agent):
    with agent.client() as client:
        response = client.post("/v1/hello", json={"protocol_version": "99.0"})
    assert response.status_code == 409
    body = ErrorBody.model_validate(response.json())
    assert body.error == "protocol_mismatch"
    assert PROTOCOL_VERSION in body.message and "99.0" in body.message


def test_bad_input_gets_a_4xx_with_a_message(agent):
    with agent.client() as client:
        bad_json = client.post("/v1/hello", content=b"{not json", headers={"content-type": "application/json"})
        wrong_type = client.post("/v1/hello", json={"protocol_version": ["a list"]})
        bad_since = client.get("/v1/telemetry", params={"since": "abc"})
        future = client.get("/v1/telemetry", params={"since": 10**9})
        future_stream = client.get("/v1/telemetry/stream", params={"since": 10**9})
    for response in (bad_json, wrong_type, bad_since):
        assert response.status_code == 422
        assert ErrorBody.model_validate(response.json()).message
        assert "Traceback" not in response.text
    for response in (future, future_stream):
        assert response.status_code == 409  # well formed, but no seq this agent produced
        assert ErrorBody.model_validate(response.json()).error == "unknown_since"


def test_telemetry_history_since(agent):
    with agent.client() as client:
        _read_samples(client, 3, since=0)
        page = TelemetryPage.model_validate(client.get("/v1/telemetry", params={"since": 0}).json())
        assert page.lost == 0 and page.samples[0].seq == 1
        seqs = [s.seq for s in page.samples]
        assert seqs == list(range(1, len(seqs) + 1)) and page.last_seq >= seqs[-1]
        later = TelemetryPage.model_validate(client.get("/v1/telemetry", params={"since": 2, "limit": 1}).json())
    assert [s.seq for s in later.samples] == [3]


def test_stream_resumes_without_gaps_after_a_reconnect(agent):
    with agent.client() as client:
        first, _ = _read_samples(client, 5, since=0)
        time.sleep(0.5)  # samples keep coming while we are away; the resume must include them
        second, lost = _read_samples(client, 10, since=first[-1].seq)
    seqs = [s.seq for s in first + second]
    assert seqs == list(range(1, len(seqs) + 1))
    assert not lost


def test_stream_honours_last_event_id(agent):
    with agent.client() as client:
        first, _ = _read_samples(client, 2, since=0)
        client.headers["Last-Event-ID"] = str(first[-1].seq)
        second, _ = _read_samples(client, 1)
    assert second[0].seq == first[-1].seq + 1


def test_metrics_and_openapi(agent):
    with agent.client() as client:
        metrics = client.get("/metrics").text
        openapi = client.get("/openapi.json").json()
    assert "sparksync_memory_total_bytes" in metrics and "sparksync_cpu_percent" in metrics
    assert 'sparksync_agent_info{' in metrics
    assert {"/v1/hello", "/v1/snapshot", "/v1/telemetry", "/v1/telemetry/stream"} <= set(openapi["paths"])


def test_metrics_public_only_when_asked(agent_factory):
    agent = agent_factory("--metrics-public")
    with agent.client(token="") as client:
        assert client.get("/metrics").status_code == 200
        assert client.get("/v1/snapshot").status_code == 401


def test_sigterm_stops_within_two_seconds_with_a_client_streaming(agent):
    received = threading.Event()

    def stream_forever():
        try:
            with agent.client() as client, connect_sse(client, "GET", "/v1/telemetry/stream") as source:
                for _ in source.iter_sse():
                    received.set()
        except httpx.HTTPError:
            pass

    reader = threading.Thread(target=stream_forever, name="stream-reader")
    reader.start()
    assert received.wait(10)
    took = agent.stop()
    reader.join(5)
    # uvicorn re-raises the signal after a clean shutdown, as systemd expects.
    assert agent.proc.returncode in (0, -15), agent.log()
    assert "agent stopped" in agent.log()
    assert took < 2.0, f"SIGTERM took {took:.2f} s"
    assert not (agent.state_dir / "endpoint.json").exists()
    assert list(agent.state_dir.glob(".*.tmp")) == []  # no temp file of an interrupted write either


def test_every_sample_in_order_beside_a_lagging_client_and_one_that_leaves(agent):
    """The tick writes to caught-up clients itself (api/direct.py); none of them may miss a sample."""
    readers: dict[str, list[int]] = {"steady": [], "lagging": [], "leaving": []}
    errors: list[BaseException] = []
    stop = threading.Event()

    def read(name: str, pause_every: int = 0, leave_after: int = 0) -> None:
        try:
            with agent.client() as client, connect_sse(client, "GET", "/v1/telemetry/stream") as source:
                for event in source.iter_sse():
                    assert event.event == "sample", event.event  # a 'lost' event would mean a gap
                    readers[name].append(Sample.model_validate_json(event.data).seq)
                    if pause_every and len(readers[name]) % pause_every == 0:
                        time.sleep(0.7)  # behind by several samples, caught up again later
                    if stop.is_set() or len(readers[name]) == leave_after:
                        return
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=read, args=("steady",)),
               threading.Thread(target=read, args=("lagging", 5)),
               threading.Thread(target=read, args=("leaving", 0, 4))]  # fmt: skip
    for thread in threads:
        thread.start()
    time.sleep(3.0)
    with agent.client() as client:
        assert AgentStatus.model_validate(client.get("/v1/status").json()).stream_clients == 2  # one left
    stop.set()
    for thread in threads:
        thread.join(10)
    assert not errors, errors
    for name, seqs in readers.items():
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), (name, seqs)
    assert len(readers["steady"]) >= 20 and len(readers["lagging"]) >= 10 and len(readers["leaving"]) == 4
    assert "Traceback" not in agent.log()
