"""API behaviour that a real process cannot reach quickly: a tiny ring, a failing collector."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from sparksync_agent import sampler as sampler_module
from sparksync_agent.api.app import create_app
from sparksync_agent.collectors import Collector, CollectorSet
from sparksync_agent.protocol import MemorySample, NodeInfo, TelemetryPage
from sparksync_agent.runtime import AgentOptions, AgentRuntime

TOKEN = "unit-test-token"


class CountingMemory(Collector):
    name, field = "memory", "memory"

    def sample(self, now: float) -> MemorySample:
        return MemorySample(total_bytes=100, used_bytes=40, available_bytes=60, free_bytes=10, cached_bytes=5,
                            buffers_bytes=1, swap_total_bytes=0, swap_used_bytes=0)


class Broken(Collector):
    name, field = "broken", "cpu"

    def sample(self, now: float):
        raise OSError("sensor gone")


def _runtime(tmp_path: Path, collectors: list[Collector]) -> AgentRuntime:
    info = NodeInfo(node_id="n1", hostname="h", arch="x86_64", os="Debian", kernel="6", cpu_count=2, boot_time=0)
    options = AgentOptions(state_dir=tmp_path, sample_hz=10)
    return AgentRuntime(options, "n1", info, CollectorSet(collectors))


def _client(runtime: AgentRuntime) -> TestClient:
    return TestClient(create_app(runtime, TOKEN), headers={"Authorization": f"Bearer {TOKEN}"})


def _wait_for_seq(runtime: AgentRuntime, seq: int) -> None:
    deadline = time.monotonic() + 10
    while runtime.sampler.ring.last_seq < seq:
        assert time.monotonic() < deadline, "the sampler stalled"
        time.sleep(0.02)


def test_since_older_than_the_ring_returns_the_oldest_and_says_what_was_lost(tmp_path, monkeypatch):
    monkeypatch.setattr(sampler_module, "RING_SECONDS", 0.4)  # 4 samples at 10 Hz
    runtime = _runtime(tmp_path, [CountingMemory()])
    with _client(runtime) as client:
        _wait_for_seq(runtime, 8)
        page = TelemetryPage.model_validate(client.get("/v1/telemetry", params={"since": 0}).json())
    assert page.lost >= 4
    assert page.samples[0].seq == page.lost + 1
    assert len(page.samples) == 4


def test_stream_flags_lost_samples_before_resuming(tmp_path, monkeypatch):
    monkeypatch.setattr(sampler_module, "RING_SECONDS", 0.4)
    runtime = _runtime(tmp_path, [CountingMemory()])
    with _client(runtime) as client:
        _wait_for_seq(runtime, 8)
        with client.stream("GET", "/v1/telemetry/stream", params={"since": 1}) as response:
            head = b""
            for chunk in response.iter_bytes():
                head += chunk
                if b"event: sample" in head:
                    break
        runtime.stopping.set()
    assert head.startswith(b"event: lost\ndata: {\"lost\": ")


def test_a_failing_collector_is_disabled_and_the_agent_keeps_serving(tmp_path, caplog):
    runtime = _runtime(tmp_path, [Broken(), CountingMemory()])
    with _client(runtime) as client:
        _wait_for_seq(runtime, 3)
        status = client.get("/v1/status").json()
        snapshot = client.get("/v1/snapshot").json()
    states = {c["name"]: c for c in status["collectors"]}
    assert states["broken"]["enabled"] is False and "sensor gone" in states["broken"]["reason"]
    assert states["memory"]["enabled"] is True
    assert snapshot["latest"]["memory"]["used_bytes"] == 40
    assert sum("broken failed" in r.getMessage() for r in caplog.records) == 1  # logged once


@pytest.mark.parametrize("path", ["/v1/snapshot", "/openapi.json"])
def test_wrong_token_gets_no_data(tmp_path, path):
    runtime = _runtime(tmp_path, [CountingMemory()])
    with TestClient(create_app(runtime, TOKEN), headers={"Authorization": "Bearer nope"}) as client:
        response = client.get(path)
    assert response.status_code == 401 and "used_bytes" not in response.text
