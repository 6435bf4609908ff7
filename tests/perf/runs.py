"""The measurement runs behind the agent benchmarks.

Each run starts what it measures, measures it, and stops everything before it
returns, so the suite's leak guard sees nothing left behind and a failing
measurement never leaves an agent or a Glances server running.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from tests.agent.agentproc import RunningAgent, start_agent
from tests.perf.glancesproc import GlancesPoller, start_glances
from tests.perf.probes import (
    CpuWindow,
    Received,
    RssRecorder,
    SampleStream,
    idle_loop,
    measure_cpu,
    non_loopback_sockets,
    request_latencies,
    tcp_echo_round_trips,
)
from tests.perf.settings import Durations

ECHO_ROUND_TRIPS = 2000
STATUS_REQUESTS = 300


@contextlib.contextmanager
def running_agent(workdir: Path, hz: float) -> Iterator[RunningAgent]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPARKSYNC_HOME", str(workdir / "home"))
        argv = ("--sample-hz", f"{hz:g}", "--no-advertise")
        agent = start_agent(workdir / "state", workdir / "agent.log", *argv)
    try:
        yield agent
    finally:
        agent.stop()


@contextlib.contextmanager
def streaming(agent: RunningAgent) -> Iterator[SampleStream]:
    """One SSE client reading every sample, for as long as the block runs."""
    with agent.client() as client:
        stream = SampleStream(client).start()
        try:
            yield stream
        finally:
            stream.stop()


def waiter(label: str, *health: Callable[[], None]) -> Callable[[float], None]:
    """A wait that prints progress each minute of the run and stops early when a health check raises."""
    started = time.monotonic()
    next_note = started + 60.0

    def wait(seconds: float) -> None:
        nonlocal next_note
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(left, 0.5))
            for check in health:
                check()
            if time.monotonic() >= next_note:
                print(f"  [{label}] {(time.monotonic() - started) / 60:.0f} min in", flush=True)
                next_note += 60.0

    return wait


def stream_healthy(stream: SampleStream) -> Callable[[], None]:
    def check() -> None:
        if stream.error is not None or not stream.alive:
            raise AssertionError(f"the SSE client stopped early: {stream.error!r}")

    return check


def poller_healthy(poller: GlancesPoller) -> Callable[[], None]:
    def check() -> None:
        if poller.error is not None:
            raise AssertionError(f"polling Glances failed: {poller.error!r}")

    return check


@dataclass
class LongRun:
    """The agent at 10 Hz with one client streaming, for the memory duration."""

    hz: float
    cpu: CpuWindow
    idle_loop_cpu: CpuWindow  # a bare asyncio loop waking at the same rate, same window
    samples: list[Received] = field(repr=False)  # those taken after the warm-up
    lost_events: int
    rss: list[tuple[float, int]] = field(repr=False)
    last_seq: int
    echo_rtt_s: list[float] = field(repr=False)
    status_s: list[float] = field(repr=False)
    foreign_sockets: list[str] = field(default_factory=list)


def long_run(workdir: Path, d: Durations, hz: float = 10.0) -> LongRun:
    print(f"\nagent at {hz:g} Hz, one client streaming, {d.memory_s / 60:.1f} min (CPU early, RSS all along)")
    with running_agent(workdir, hz) as agent, streaming(agent) as stream:
        proc = psutil.Process(agent.proc.pid)
        rss = RssRecorder(proc, d.rss_every_s).start()
        started = time.monotonic()
        try:
            wait = waiter(f"agent {hz:g} Hz", stream_healthy(stream))
            with idle_loop(hz) as floor:  # started before the warm-up, so its imports are not counted
                wait(d.warmup_s)
                measured_from = time.time()
                cpu, floor_cpu = measure_cpu([proc, floor], d.cpu_s, wait)
            wait(max(0.0, d.memory_s - (time.monotonic() - started)))
        finally:
            rss.stop()
        status, last_seq = _status_round_trips(agent)
        foreign = non_loopback_sockets(proc)
    echo = tcp_echo_round_trips(ECHO_ROUND_TRIPS)
    samples = stream.since(measured_from)
    lost = stream.lost_events
    return LongRun(hz, cpu, floor_cpu, samples, lost, rss.points, last_seq, echo, status, foreign)


def _status_round_trips(agent: RunningAgent) -> tuple[list[float], int]:
    """Plain request latency (an anchor), and the newest seq (how full the ring is)."""
    with agent.client() as client:
        times = request_latencies(client, "/v1/status", STATUS_REQUESTS)
        return times, client.get("/v1/status").json()["last_seq"]


@dataclass
class PairedRun:
    """The agent and Glances side by side at the same rate, over the same window."""

    hz: float
    agent_cpu: CpuWindow
    glances_cpu: CpuWindow
    samples: int
    polls: int
    glances_rss: int
    foreign_sockets: list[str]


def paired_run(workdir: Path, d: Durations, hz: float) -> PairedRun:
    print(f"\nagent and glances side by side at {hz:g} Hz, {d.cpu_s / 60:.1f} min")
    with running_agent(workdir, hz) as agent, streaming(agent) as stream:
        with glances_polled(workdir, hz) as (glances, poller):
            wait = waiter(f"both {hz:g} Hz", stream_healthy(stream), poller_healthy(poller))
            wait(d.warmup_s)
            agent_proc = psutil.Process(agent.proc.pid)
            seq0, polls0 = len(stream.received), poller.polls
            agent_cpu, glances_cpu = measure_cpu([agent_proc, glances], d.cpu_s, wait)
            foreign = non_loopback_sockets(agent_proc) + non_loopback_sockets(glances)
            rss = glances.memory_info().rss
            counts = len(stream.received) - seq0, poller.polls - polls0
    return PairedRun(hz, agent_cpu, glances_cpu, *counts, rss, foreign)


@dataclass
class GlancesRun:
    hz: float
    cpu: CpuWindow
    polls: int
    rss: int
    foreign_sockets: list[str]


def glances_run(workdir: Path, d: Durations, hz: float) -> GlancesRun:
    print(f"\nglances server at {hz:g} Hz, one client polling, {d.cpu_s / 60:.1f} min")
    with glances_polled(workdir, hz) as (glances, poller):
        wait = waiter(f"glances {hz:g} Hz", poller_healthy(poller))
        wait(d.warmup_s)
        polls0 = poller.polls
        (cpu,) = measure_cpu([glances], d.cpu_s, wait)
        polls = poller.polls - polls0
        return GlancesRun(hz, cpu, polls, glances.memory_info().rss, non_loopback_sockets(glances))


@contextlib.contextmanager
def glances_polled(workdir: Path, hz: float) -> Iterator[tuple[psutil.Process, GlancesPoller]]:
    server = start_glances(workdir / f"glances-{hz:g}hz", refresh_s=1.0 / hz)
    try:
        poller = GlancesPoller(server.url, hz).start()
        try:
            yield psutil.Process(server.proc.pid), poller
        finally:
            poller.stop()
    finally:
        server.stop()
