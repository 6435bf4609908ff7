"""Is the dashboard responsive under a full cluster's load, and does the app open fast?

Stalls: 8 simulated nodes stream 6 series each at 10 Hz (480 values a
second) into the dashboard showing a 10-minute window, already full. A 5 ms
heartbeat timer on the GUI thread records how late it fires: that lateness
is the event loop's stall. Alongside: the CPU the GUI process used (as % of
one core) and its RSS over the run. Targets (issues 4, 19): stall p99 <= 16 ms,
max <= 30 ms, CPU <= 20% of a core, memory flat. Anchor, same load in the same run: a
naive dashboard that appends to Python lists and calls setData with the
whole lists on every tick.

What the remaining stalls are made of: the same load once more with the
GUI thread's stack sampled (``gui_profile.StackSampler``); the report lists
the top causes by the stall time they account for (that run is slowed by
the sampling, so its figures are not the measured ones).

Start-up: ``python -m sparksync.gui.app`` from spawn to its first painted
window (targets <= 1.5 s, and <= 2.5 x the anchor: a bare PySide6 QWidget app
started the same way, from byte code as an installed app starts, after one
untimed run of each). The dashboard's plots are built after that first paint;
the time until every plot has painted is reported beside it.

Durations: the dashboard runs 60 s x $SPARKSYNC_PERF_SCALE (the anchor a
third of that). The issue's "memory flat over 30 min" is a soak run:
SPARKSYNC_GUI_SOAK_MIN=30 makes the dashboard phase last 30 minutes.
"""

from __future__ import annotations

import gc
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QMainWindow

from tests.perf.gui_profile import STALL_MS, StackSampler, top_causes
from tests.perf.gui_load import (
    SERIES_PER_NODE,
    Heartbeat,
    NaiveDashboard,
    SimulatedNodes,
    run_event_loop,
    stall_summary,
)
from tests.perf.probes import MB, CpuWindow, RssRecorder, cpu_seconds, slope
from tests.perf.report import Report, assert_targets
from tests.perf.settings import Durations, installed_env, scale_from_env

SOAK_ENV = "SPARKSYNC_GUI_SOAK_MIN"
NODES, HZ, WINDOW_S = 8, 10.0, 600.0
STALL_P99_TARGET_MS = 16.0
STALL_MAX_TARGET_MS = 30.0  # issue 19
CPU_TARGET_PCT = 20.0  # issue 19 (issue 4 asked 25 %)
STARTUP_TARGET_S = 1.5
STARTUP_RATIO_TARGET = 2.5  # issue 19: first paint within 2.5 x a bare PySide6 window's
STARTUP_RUNS = 5
# Flat: after the warm-up nothing should grow but allocator steps; 1 MB/min is 60 MB an hour.
RSS_SLOPE_LIMIT_MB_PER_MIN = 1.0
DELIVERED_SHARE = 0.95  # the feeder must really have delivered the load it promised


def _dashboard_s(durations: Durations) -> float:
    soak = os.environ.get(SOAK_ENV)
    if soak:
        try:
            return float(soak) * 60
        except ValueError:
            raise pytest.UsageError(f"{SOAK_ENV} must be a number of minutes, got {soak!r}") from None
    return 60.0 * durations.scale


def _timeout_s() -> int:
    soak = os.environ.get(SOAK_ENV)
    base = float(soak) * 60 if soak and soak.replace(".", "", 1).isdigit() else 60 * scale_from_env()
    return int(base * 2) + 300


pytestmark = [pytest.mark.perf, pytest.mark.gui, pytest.mark.timeout(_timeout_s())]


class _Sink(QObject):
    """Receives the simulated samples on the GUI thread (a queued connection), as the window does."""

    def __init__(self, add):
        super().__init__()
        self._add = add
        self.received = 0

    @Slot(str, object)
    def take(self, node: str, sample) -> None:
        self._add(node, sample)
        self.received += 1


@dataclass
class Phase:
    name: str
    seconds: float
    stalls: dict[str, float]
    cpu: CpuWindow
    rss: list[tuple[float, int]] = field(repr=False)
    received: int = 0
    frames: int = 0
    causes: list[tuple[str, float, float]] = field(default_factory=list)  # profiled phase only
    stall_ms: float = 0.0  # profiled phase: the stall time the causes share

    @property
    def rss_slope_mb_per_min(self) -> float:
        second_half = [(t, r / MB) for t, r in self.rss if t >= self.rss[-1][0] / 2]
        return slope(second_half) * 60 if len(second_half) >= 2 else 0.0

    def figures(self, report: Report, label: str) -> None:
        key = self.name
        report.figure(f"{key}_stall_p50_ms", self.stalls["p50_ms"], f"{label}: stall p50", "ms")
        report.figure(f"{key}_stall_p99_ms", self.stalls["p99_ms"], f"{label}: stall p99", "ms")
        report.figure(f"{key}_stall_max_ms", self.stalls["max_ms"], f"{label}: stall max", "ms")
        report.figure(f"{key}_cpu_pct", self.cpu.percent_of_core, f"{label}: CPU", "% of one core")
        report.figure(f"{key}_rss_start_mb", self.rss[0][1] / MB, f"{label}: RSS at start", "MB")
        report.figure(f"{key}_rss_end_mb", self.rss[-1][1] / MB, f"{label}: RSS at end", "MB")
        report.figure(
            f"{key}_rss_slope_mb_per_min",
            self.rss_slope_mb_per_min,
            f"{label}: RSS slope, 2nd half",
            "MB/min",
        )
        report.figure(f"{key}_frames", self.frames, f"{label}: redraws", f"in {self.seconds:.0f} s")
        report.figure(
            f"{key}_samples", self.received, f"{label}: samples drawn from", f"in {self.seconds:.0f} s"
        )


def _measure(name: str, sink: _Sink, feeder: SimulatedNodes, seconds: float, frames, profile: bool = False) -> Phase:
    proc = psutil.Process()
    feeder.sample_ready.connect(sink.take)
    feeder.start()
    try:
        run_event_loop(min(5.0, max(1.0, seconds / 10)))  # warm-up: caches, first layouts
        heartbeat = Heartbeat()
        rss = RssRecorder(proc, every_s=max(1.0, seconds / 120)).start()
        received0, frames0 = sink.received, frames()
        cpu0, t0 = cpu_seconds(proc), time.monotonic()
        sampler = StackSampler().start() if profile else None
        heartbeat.start()
        run_event_loop(seconds)
        heartbeat.stop()
        if sampler is not None:
            sampler.stop()
        cpu = CpuWindow(cpu_seconds(proc) - cpu0, time.monotonic() - t0)
        rss.stop()
    finally:
        feeder.stop()
        feeder.sample_ready.disconnect(sink.take)
    run_event_loop(0.2)  # let queued samples land before the next phase
    phase = Phase(name, seconds, stall_summary(heartbeat.lateness_ms), cpu, rss.points,
                  sink.received - received0, frames() - frames0)  # fmt: skip
    if sampler is not None:
        phase.causes, phase.stall_ms = top_causes(sampler.samples, heartbeat.beats, heartbeat.period_s)
    return phase


def _window(widget) -> QMainWindow:
    window = QMainWindow()
    window.setCentralWidget(widget)
    window.resize(1280, 800)
    window.show()
    return window


def _dashboard_phase(qtbot, seconds: float, profile: bool = False) -> Phase:
    from sparksync.core.telemetry.dashboard_model import DashboardModel
    from sparksync.gui.dashboard.dashboard_view import DashboardView
    from sparksync.gui.dashboard.history_bridge import HistoryBridge

    model = DashboardModel()
    view = DashboardView(model, window_s=WINDOW_S)
    window = _window(view)
    qtbot.waitExposed(window)
    history = HistoryBridge()  # one-second rows go to SQLite in a worker, as in the app
    model.row_listeners.append(history.put)
    history.start(3600)
    feeder = SimulatedNodes(NODES, HZ)
    for node, sample in feeder.history(WINDOW_S, time.time()):  # the 10-minute window starts full
        model.add_sample(node, sample)
    gc.collect()
    drawn = []
    view.frame_drawn.connect(lambda: drawn.append(1))
    try:
        phase = _measure("profiled" if profile else "dashboard", _Sink(model.add_sample), feeder, seconds,
                         lambda: len(drawn), profile)  # fmt: skip
    finally:
        with qtbot.waitSignal(history.stopped, timeout=15_000):
            history.stop()
        window.close()
        window.deleteLater()
    return phase


def _naive_phase(qtbot, seconds: float) -> Phase:
    naive = NaiveDashboard(WINDOW_S)
    window = _window(naive)
    qtbot.waitExposed(window)
    feeder = SimulatedNodes(NODES, HZ)
    for node, sample in feeder.history(WINDOW_S, time.time()):
        naive.add(node, sample)
    gc.collect()
    try:
        return _measure("naive", _Sink(naive.add), feeder, seconds, lambda: naive.frames)
    finally:
        window.close()
        window.deleteLater()


def _idle_stalls(seconds: float) -> dict[str, float]:
    """The same heartbeat with nothing else to do: what the machine itself adds (other processes, VM)."""
    heartbeat = Heartbeat()
    heartbeat.start()
    run_event_loop(seconds)
    heartbeat.stop()
    return stall_summary(heartbeat.lateness_ms)


def test_dashboard_stalls_cpu_and_memory(qtbot, durations, perf_out):
    seconds = _dashboard_s(durations)
    print(f"\n  dashboard phase {seconds:.0f} s (soak: ${SOAK_ENV} minutes), anchor {seconds / 3:.0f} s")
    idle = _idle_stalls(max(5.0, 10.0 * durations.scale))
    ours = _dashboard_phase(qtbot, seconds)
    naive = _naive_phase(qtbot, max(5.0, seconds / 3) if not os.environ.get(SOAK_ENV) else 60.0)
    # What the stalls that remain are made of: the same load again, its GUI thread sampled (slower for it).
    profiled = _dashboard_phase(qtbot, max(10.0, seconds / 3), profile=True)

    report = Report("gui_stalls")
    report.note(
        f"load: {NODES} nodes x {SERIES_PER_NODE} series at {HZ:g} Hz, {WINDOW_S / 60:.0f}-minute window (full)"
    )
    report.figure("idle_stall_p99_ms", idle["p99_ms"], "idle event loop (machine noise): stall p99", "ms")
    report.figure("idle_stall_max_ms", idle["max_ms"], "idle event loop (machine noise): stall max", "ms")
    report.note(
        f"load average while measuring: {' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs"
    )
    ours.figures(report, "dashboard")
    naive.figures(report, "naive anchor")
    for what in ("p99_ms", "max_ms"):
        ratio = naive.stalls[what] / max(ours.stalls[what], 0.01)
        report.figure(f"stall_{what}_ratio", ratio, f"anchor / dashboard, stall {what[:-3]}", "x")
    report.figure(
        "cpu_ratio",
        naive.cpu.percent_of_core / max(ours.cpu.percent_of_core, 0.01),
        "anchor / dashboard, CPU",
        "x",
    )
    report.note(f"top causes of the stalls (>= {STALL_MS:g} ms) in a profiled run of {profiled.seconds:.0f} s, "
                f"{profiled.stall_ms:.0f} ms of stall in all (stall p99 there "
                f"{profiled.stalls['p99_ms']:.1f} ms, the sampling slows the GUI thread):")
    for cause, ms, share in profiled.causes:
        report.note(f"  {share:6.1%}  {ms:8.1f} ms  {cause}")
    expected = NODES * HZ * ours.seconds
    report.check("stall p99", ours.stalls["p99_ms"] <= STALL_P99_TARGET_MS,
                 f"{ours.stalls['p99_ms']:.1f} ms <= {STALL_P99_TARGET_MS:g} ms")  # fmt: skip
    report.check("stall max", ours.stalls["max_ms"] <= STALL_MAX_TARGET_MS,
                 f"{ours.stalls['max_ms']:.1f} ms <= {STALL_MAX_TARGET_MS:g} ms")  # fmt: skip
    report.check("CPU", ours.cpu.percent_of_core <= CPU_TARGET_PCT,
                 f"{ours.cpu.percent_of_core:.1f}% <= {CPU_TARGET_PCT:g}% of one core")  # fmt: skip
    report.check("memory flat", ours.rss_slope_mb_per_min <= RSS_SLOPE_LIMIT_MB_PER_MIN,
                 f"{ours.rss_slope_mb_per_min:.2f} MB/min <= {RSS_SLOPE_LIMIT_MB_PER_MIN:g} MB/min")  # fmt: skip
    report.check("load delivered", ours.received >= DELIVERED_SHARE * expected,
                 f"{ours.received} samples of {expected:.0f} expected")  # fmt: skip
    report.publish(perf_out)
    assert_targets(report)


# --- start-up --------------------------------------------------------------------------------

BARE_APP = """
import sys, time
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QWidget
app = QApplication(sys.argv)
window = QWidget()
window.resize(1280, 800)
class FirstPaint(QObject):
    def eventFilter(self, watched, event):
        if event.type() == QEvent.Type.Paint:
            window.removeEventFilter(self)
            QTimer.singleShot(0, self.report)
        return False
    def report(self):
        print(f"first-paint {time.time():.6f} {time.process_time():.4f}", flush=True)
        app.quit()
first = FirstPaint()
window.installEventFilter(first)
window.show()
app.exec()
"""


def _first_paint_s(argv: list[str], env: dict[str, str]) -> tuple[float, float, float | None]:
    """(wall seconds from spawn to the first paint, the process's CPU seconds by then, and the wall
    seconds to every plot painted, which the app reports after its first paint; None for the bare app)."""
    started = time.time()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        marks = {line.split()[0]: line.split()[1:] for line in proc.stdout if line.strip()}
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if "first-paint" not in marks:
        raise AssertionError(f"{argv[:3]} never reported its first paint (exit code {proc.returncode})")
    at, cpu = marks["first-paint"]
    plots = float(marks["plots-painted"][0]) - started if "plots-painted" in marks else None
    return float(at) - started, float(cpu), plots


def test_startup_to_first_paint(tmp_path, perf_out):
    env = {**installed_env(os.environ, Path(tmp_path) / "pycache"), "SPARKSYNC_GUI_EXIT_AFTER_FIRST_PAINT": "1"}
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env["SPARKSYNC_HOME"] = str(Path(tmp_path) / "home-warm")
    for argv in ([sys.executable, "-m", "sparksync.gui.app"], [sys.executable, "-c", BARE_APP]):
        _first_paint_s(argv, env)  # untimed: writes the byte code and warms the file cache
    app_runs, bare_runs = [], []
    for run in range(STARTUP_RUNS):  # interleaved, so both see the same machine
        env["SPARKSYNC_HOME"] = str(Path(tmp_path) / f"home-{run}")
        app_runs.append(_first_paint_s([sys.executable, "-m", "sparksync.gui.app"], env))
        bare_runs.append(_first_paint_s([sys.executable, "-c", BARE_APP], env))
    app, bare = [w for w, _, _ in app_runs], [w for w, _, _ in bare_runs]
    app_cpu, bare_cpu = [c for _, c, _ in app_runs], [c for _, c, _ in bare_runs]
    plots = [p for _, _, p in app_runs]
    if None in plots:
        raise AssertionError("the app closed without reporting its plots painted")
    report = Report("gui_startup")
    report.note(f"{STARTUP_RUNS} runs each, QT_QPA_PLATFORM={env['QT_QPA_PLATFORM']}")
    report.figure(
        "app_first_paint_median_s", statistics.median(app), "sparksync-gui: spawn to first paint, median", "s"
    )
    report.figure("app_first_paint_max_s", max(app), "sparksync-gui: spawn to first paint, max", "s")
    report.figure(
        "bare_first_paint_median_s", statistics.median(bare), "bare PySide6 QWidget: median (anchor)", "s"
    )
    report.figure("ratio", statistics.median(app) / statistics.median(bare), "app / anchor", "x")
    report.figure(
        "app_plots_painted_median_s", statistics.median(plots), "sparksync-gui: spawn to every plot painted", "s"
    )
    # On a shared machine the wall clock carries the neighbours' load; the CPU seconds do not.
    report.figure("app_first_paint_cpu_s", statistics.median(app_cpu), "sparksync-gui: CPU by first paint, median", "s")
    report.figure("bare_first_paint_cpu_s", statistics.median(bare_cpu), "bare PySide6 QWidget: CPU (anchor)", "s")
    report.figure("cpu_ratio", statistics.median(app_cpu) / statistics.median(bare_cpu), "app / anchor, CPU", "x")
    report.check("start-up", statistics.median(app) <= STARTUP_TARGET_S,
                 f"median {statistics.median(app):.2f} s <= {STARTUP_TARGET_S:g} s")  # fmt: skip
    ratio = statistics.median(app) / statistics.median(bare)
    report.check("start-up against a bare window", ratio <= STARTUP_RATIO_TARGET,
                 f"{ratio:.1f} x <= {STARTUP_RATIO_TARGET:g} x")  # fmt: skip
    report.publish(perf_out)
    assert_targets(report)
