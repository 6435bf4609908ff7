"""What the agent costs the node it watches: CPU, sample latency and memory.

Every figure is printed next to an anchor measured in the same run (Glances,
a bare asyncio loop, a loopback TCP echo, the agent's own start), written as
JSON to the results directory, and only then checked against the issue's targets:

- CPU: at 10 Hz with one client streaming, at most 0.3 CPU-s per minute (0.5% of
  a core), and at least 5x less than Glances sampling at the same rate;
- latency: sample taken -> sample held by a loopback client, p99 at most 20 ms;
- memory: at most 80 MB RSS after 10 minutes at 10 Hz, and flat.

Durations are the issue's (a minute per CPU figure, ten for memory); set
SPARKSYNC_PERF_SCALE=0.05 for a quick smoke run of the whole file.
"""

from __future__ import annotations

import pytest

from sparksync_agent.sampler import ring_capacity
from tests.perf.probes import MB, CpuWindow, gaps, percentile, slope
from tests.perf.report import Report, assert_targets
from tests.perf.runs import GlancesRun, LongRun, PairedRun, glances_run, long_run, paired_run
from tests.perf.settings import Durations, scale_from_env

pytestmark = [pytest.mark.perf, pytest.mark.timeout(Durations(scale_from_env()).timeout_s)]

CPU_TARGET_S_PER_MIN = 0.3
GLANCES_RATIO_TARGET = 5.0
LATENCY_P99_TARGET_MS = 20.0
RSS_TARGET_MB = 80.0
# Flat means no growth beyond the telemetry ring filling up (it holds 11 minutes, so it is
# still filling at 10). The allowance covers allocator steps; a 0.3 MB/min leak is 18 MB an hour.
LEAK_ALLOWANCE_MB_PER_MIN = 0.2
RSS_STEP_MB = 0.5  # allocator granularity: spread over the fitted window, it bounds the slope noise
# Each ring entry is a bytes object (33-byte header + the JSON) plus a deque slot.
RING_ENTRY_OVERHEAD_BYTES = 33 + 8
RATE_TOLERANCE = 0.05  # the servers must run at the configured rate within 5%


@pytest.fixture(scope="module")
def at_10hz(tmp_path_factory, durations) -> LongRun:
    return long_run(tmp_path_factory.mktemp("agent-10hz"), durations, hz=10.0)


@pytest.fixture(scope="module")
def side_by_side_1hz(tmp_path_factory, durations) -> PairedRun:
    return paired_run(tmp_path_factory.mktemp("paired-1hz"), durations, hz=1.0)


@pytest.fixture(scope="module")
def glances_10hz(tmp_path_factory, durations) -> GlancesRun:
    return glances_run(tmp_path_factory.mktemp("glances-10hz"), durations, hz=10.0)


# --- CPU ---------------------------------------------------------------------------------


def test_agent_cpu_overhead(at_10hz, side_by_side_1hz, glances_10hz, durations, perf_out):
    report = Report("agent_cpu_overhead")
    report.note(f"CPU-seconds per minute of each server process, {at_10hz.cpu.wall_s:.0f} s windows")
    rows = {
        "agent_1hz": ("agent    1 Hz, one client streaming", side_by_side_1hz.agent_cpu),
        "agent_10hz": ("agent   10 Hz, one client streaming", at_10hz.cpu),
        "glances_1hz": ("glances  1 Hz, one client polling", side_by_side_1hz.glances_cpu),
        "glances_10hz": ("glances 10 Hz, one client polling", glances_10hz.cpu),
    }
    for key, (label, window) in rows.items():
        report.figure(f"{key}_cpu_s_per_min", window.per_minute, label, "CPU-s/min")
    report.figure("agent_10hz_percent_of_core", at_10hz.cpu.percent_of_core, "agent   10 Hz", "% of one core")
    ratios = {hz: _cpu_ratio(report, hz, rows[f"glances_{hz}hz"][1], rows[f"agent_{hz}hz"][1])
              for hz in (1, 10)}
    _idle_loop_floor(report, at_10hz)
    _check_rates(report, side_by_side_1hz, glances_10hz, durations)
    foreign = side_by_side_1hz.foreign_sockets + glances_10hz.foreign_sockets
    report.check("no socket beyond loopback", not foreign, str(foreign or "none"))
    per_min = at_10hz.cpu.per_minute
    report.check("agent 10 Hz CPU", per_min <= CPU_TARGET_S_PER_MIN,
                 f"{per_min:.3f} CPU-s/min, target <= {CPU_TARGET_S_PER_MIN}")
    for hz, ratio in ratios.items():
        report.check(f"glances/agent at {hz} Hz", ratio >= GLANCES_RATIO_TARGET,
                     f"{ratio:.1f}x, target >= {GLANCES_RATIO_TARGET:g}x")
    report.publish(perf_out)
    assert_targets(report)


def _cpu_ratio(report: Report, hz: int, glances: CpuWindow, agent: CpuWindow) -> float:
    ratio = glances.per_minute / agent.per_minute if agent.per_minute > 0 else float("inf")
    report.figure(f"ratio_glances_over_agent_{hz}hz", ratio, f"ratio glances/agent at {hz:>2} Hz", "x")
    return ratio


def _idle_loop_floor(report: Report, run: LongRun) -> None:
    """What waking up 10 times a second costs on this machine, whatever the work."""
    floor = run.idle_loop_cpu.per_minute
    report.note("floor, measured over the same window as the agent at 10 Hz:")
    report.figure("idle_loop_10hz_cpu_s_per_min", floor, "a bare asyncio loop waking at 10 Hz", "CPU-s/min")
    ratio = run.cpu.per_minute / floor if floor > 0 else float("inf")
    report.figure("agent_10hz_over_idle_loop", ratio, "agent 10 Hz / bare loop", "x")


def _check_rates(report: Report, paired: PairedRun, glances: GlancesRun, d: Durations) -> None:
    """The figures only compare if both servers really ran at the rate they claim."""
    report.figure("counts", {"agent_1hz_samples": paired.samples, "glances_1hz_polls": paired.polls,
                             "glances_10hz_polls": glances.polls})
    for name, got, want in (
        ("agent 1 Hz samples delivered", paired.samples, d.cpu_s * 1.0),
        ("glances 1 Hz polls", paired.polls, d.cpu_s * 1.0),
        ("glances 10 Hz polls", glances.polls, d.cpu_s * 10.0),
    ):
        ok = got >= want * (1 - RATE_TOLERANCE) - 1
        report.check(name, ok, f"{got} in {d.cpu_s:.0f} s, expected {want:.0f}")


# --- latency -----------------------------------------------------------------------------


def test_sample_latency(at_10hz, durations, perf_out):
    report = Report("sample_latency")
    lat_ms = [r.latency_s * 1000 for r in at_10hz.samples]
    status_ms = [t * 1000 for t in at_10hz.status_s]
    report.note(f"sample taken (Sample.ts) -> parsed by an SSE client on loopback, {len(lat_ms)} samples")
    _distribution(report, "latency", "latency", lat_ms, with_max=True)
    report.note("anchors, same run:")
    echo_ms = [t * 1000 for t in at_10hz.echo_rtt_s]
    _distribution(report, "tcp_echo_rtt", "loopback TCP echo round trip", echo_ms)
    _distribution(report, "get_status", "GET /v1/status round trip", status_ms)
    ratio = percentile(lat_ms, 50) / percentile(status_ms, 50)
    report.figure("latency_p50_over_status_p50", ratio, "latency p50 / GET /v1/status p50", "x")
    _check_stream(report, at_10hz, durations)
    # Not an issue target: a plain request must not stall (a missing TCP_NODELAY costs ~40 ms each).
    report.check("GET /v1/status p99", percentile(status_ms, 99) <= LATENCY_P99_TARGET_MS,
                 f"{percentile(status_ms, 99):.2f} ms, expected <= {LATENCY_P99_TARGET_MS:g} ms")
    report.check("latency p99", percentile(lat_ms, 99) <= LATENCY_P99_TARGET_MS,
                 f"{percentile(lat_ms, 99):.2f} ms, target <= {LATENCY_P99_TARGET_MS:g} ms")
    report.publish(perf_out)
    assert_targets(report)


def _distribution(
    report: Report, key: str, label: str, values_ms: list[float], with_max: bool = False
) -> None:
    for q in (50, 99):
        report.figure(f"{key}_p{q}_ms", percentile(values_ms, q), f"{label} p{q}", "ms")
    if with_max:
        report.figure(f"{key}_max_ms", max(values_ms), f"{label} max", "ms")


def _check_stream(report: Report, run: LongRun, d: Durations) -> None:
    """Latency only counts if the client really got every sample, at the rate."""
    missing = gaps(run.samples)
    report.check("stream complete", missing == 0 and run.lost_events == 0,
                 f"{missing} gaps, {run.lost_events} 'lost' events")
    seconds = d.memory_s - d.warmup_s
    report.check("stream rate", len(run.samples) >= seconds * run.hz * (1 - RATE_TOLERANCE),
                 f"{len(run.samples)} samples in ~{seconds:.0f} s at {run.hz:g} Hz")


# --- memory ------------------------------------------------------------------------------


def test_agent_memory(at_10hz, glances_10hz, durations, perf_out):
    report = Report("agent_memory")
    points = [(t / 60.0, rss / MB) for t, rss in at_10hz.rss]
    start, end, end_min = points[0][1], points[-1][1], points[-1][0]
    report.note(f"agent RSS at 10 Hz with one client streaming, {len(points)} points over {end_min:.1f} min")
    report.figure("rss_start_mb", start, "RSS at start", "MB")
    one_min = durations.cpu_s / 60.0
    report.figure("rss_1min_mb", _nearest(points, one_min), f"RSS at {one_min:.2g} min", "MB")
    report.figure("rss_end_mb", end, f"RSS at end ({end_min:.1f} min)", "MB")
    report.figure("rss_max_mb", max(y for _, y in points), "RSS max", "MB")
    beyond_ring = _growth(report, at_10hz, points)
    ring_full = end + _ring_left_mb(at_10hz)
    report.figure("rss_projected_ring_full_mb", ring_full, "projected RSS once the ring is full", "MB")
    report.figure("rss_series", [[round(t, 3), round(y, 2)] for t, y in points])
    report.note("anchors, same run:")
    report.figure("rss_end_over_start", end / start, "agent RSS end / start", "x")
    report.figure("glances_rss_mb", glances_10hz.rss / MB, "glances server RSS after its 10 Hz minute", "MB")
    allowance = LEAK_ALLOWANCE_MB_PER_MIN + RSS_STEP_MB / max(end_min / 2, 1e-6)
    for name, mb in (("RSS at end", end), ("RSS with a full ring", ring_full)):
        report.check(name, mb <= RSS_TARGET_MB, f"{mb:.1f} MB, target <= {RSS_TARGET_MB:g}")
    report.check("flat", beyond_ring <= allowance,
                 f"{beyond_ring:+.3f} MB/min beyond the ring, allowed {allowance:.2f}")
    foreign = at_10hz.foreign_sockets
    report.check("no socket beyond loopback", not foreign, str(foreign or "none"))
    report.publish(perf_out)
    assert_targets(report)


def _growth(report: Report, run: LongRun, points: list[tuple[float, float]]) -> float:
    """Slope over the last half, and how much of it is not the ring filling up."""
    end_min = points[-1][0]
    last_half = [p for p in points if p[0] >= end_min / 2]
    growth = slope(last_half)
    ring = _ring_growth_mb_per_min(run, last_half[0][0], end_min)
    report.figure("slope_last_half_mb_per_min", growth, "slope over the last half", "MB/min")
    report.figure("ring_fill_mb_per_min", ring, "of which the ring filling up (expected)", "MB/min")
    return growth - ring


def _ring_entry_bytes(run: LongRun) -> float:
    sizes = [r.size for r in run.samples]
    return sum(sizes) / len(sizes) + RING_ENTRY_OVERHEAD_BYTES


def _ring_growth_mb_per_min(run: LongRun, start_min: float, end_min: float) -> float:
    """How fast the ring grows between two minutes: one encoded sample per tick while
    it fills (11 minutes at 10 Hz), nothing once it is full."""
    full_min = ring_capacity(run.hz) / run.hz / 60.0
    filling = min(max((full_min - start_min) / (end_min - start_min), 0.0), 1.0)
    return filling * _ring_entry_bytes(run) * run.hz * 60.0 / MB


def _ring_left_mb(run: LongRun) -> float:
    """What the ring still adds before it is full and stops growing."""
    left = max(0, ring_capacity(run.hz) - run.last_seq)
    return left * _ring_entry_bytes(run) / MB


def _nearest(points: list[tuple[float, float]], minute: float) -> float:
    return min(points, key=lambda p: abs(p[0] - minute))[1]
