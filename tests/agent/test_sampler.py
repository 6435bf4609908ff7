"""The sampling tick: one encoded sample per tick, hooks once a second, streams woken."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time

import httpx

from sparksync_agent.collectors import Collector, CollectorSet
from sparksync_agent.collectors.defaults import default_collectors
from sparksync_agent.protocol import GpuSample, Reading, ReadingStatus, Sample
from sparksync_agent.sampler import Sampler


class FakeGpu(Collector):
    """A collector without a hand-written encoder: it goes through the Sample field's pydantic type."""

    name, field = "gpu", "gpu"

    def sample(self, now: float) -> list[GpuSample]:
        unsupported = Reading(status=ReadingStatus.unsupported)
        ok = Reading(value=42.0)
        return [GpuSample(index=0, name="GB10", utilization_pct=ok, temperature_c=ok, power_w=ok,
                          power_limit_w=unsupported, sm_clock_mhz=ok, memory_used_bytes=unsupported,
                          memory_total_bytes=unsupported)]  # fmt: skip


class Exploding(Collector):
    name, field = "exploding", "rdma"

    def sample(self, now: float):
        raise OSError("sensor gone")


class NotAWireValue(Collector):
    name, field = "wrong", "cpu"

    def sample(self, now: float):
        return {"percent": "lots"}


def test_each_sample_is_stored_once_as_json_that_the_wire_model_reads():
    sampler = Sampler(CollectorSet([*default_collectors(), FakeGpu()]), sample_hz=10)
    try:
        sampler.take_sample()
        time.sleep(0.05)
        sampler.take_sample()
    finally:
        sampler.collectors.close()
    ((seq, encoded),) = sampler.ring.since(1)[0]
    sample = Sample.model_validate_json(encoded)
    assert seq == sample.seq == 2
    assert sample.memory.total_bytes > 0 and sample.cpu.per_core and sample.net
    assert sample.gpu[0].power_limit_w.status == ReadingStatus.unsupported
    assert "rdma" not in json.loads(encoded)  # absent, as None fields always were
    assert sampler.latest == sample
    assert sampler.latest is sampler.latest  # decoded once per sample, not per reader


def test_a_collector_that_fails_or_returns_a_wrong_value_is_disabled_and_the_rest_go_on():
    collectors = CollectorSet([Exploding(), NotAWireValue(), FakeGpu()])
    sampler = Sampler(collectors, sample_hz=10)
    sampler.take_sample()
    sampler.take_sample()
    assert Sample.model_validate_json(sampler.ring.since(1)[0][0][1]).gpu
    states = {s.name: s for s in collectors.states()}
    assert not states["exploding"].enabled and "sensor gone" in states["exploding"].reason
    assert not states["wrong"].enabled


def test_the_clock_wakes_waiting_streams_and_runs_hooks_about_once_a_second():
    async def scenario() -> tuple[int, int, bool, bool]:
        sampler = Sampler(CollectorSet([FakeGpu()]), sample_hz=10)
        calls: list[int] = []
        sampler.every_second(lambda: calls.append(sampler.ring.last_seq))
        sampler.every_second(lambda: 1 / 0)  # a failing hook must not stop the others or the clock
        clock = asyncio.create_task(sampler.run())
        try:
            woken = await sampler.wait_for_sample(10.0)
            while len(calls) < 3:
                assert await sampler.wait_for_sample(10.0), "the sampler stalled"
        finally:
            clock.cancel()
            await asyncio.gather(clock, return_exceptions=True)
        timed_out = not await sampler.wait_for_sample(0.05)  # no clock now: the wait ends empty
        return sampler.ring.last_seq, len(calls), woken, timed_out

    samples, hook_calls, woken, timed_out = asyncio.run(scenario())
    assert woken and timed_out
    # Deadlines, not wall time, pace the hooks: one per ~10 ticks at 10 Hz (skipped ticks aside).
    assert hook_calls <= samples // 3 + 1, (hook_calls, samples)


def test_the_date_header_stays_fresh_while_the_agent_only_samples(agent):
    with httpx.Client(base_url=agent.base_url, headers={"Authorization": f"Bearer {agent.token}"}) as client:
        first = email.utils.parsedate_to_datetime(client.get("/v1/status").headers["date"])
        time.sleep(2.5)
        second = email.utils.parsedate_to_datetime(client.get("/v1/status").headers["date"])
    assert (second - first).total_seconds() >= 1
