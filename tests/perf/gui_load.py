"""Instruments for the GUI benchmarks: simulated nodes, an event-loop heartbeat and a naive anchor.

- ``SimulatedNodes`` streams Spark-shaped samples (memory, one fabric port,
  one RoCE port: six series) for N nodes at a fixed rate from a worker
  thread, as queued Qt signals: the path real samples take from a
  TelemetryWorker to the window.
- ``Heartbeat`` is a 5 ms precise QTimer on the GUI thread; how late each
  beat fires is how long the event loop was busy (a stall).
- ``NaiveDashboard`` draws the same load the way a first attempt would:
  append to Python lists, ``setData`` with the whole lists on every tick.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Iterator

import numpy as np
from PySide6.QtCore import QEventLoop, QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QGridLayout, QWidget

import pyqtgraph as pg
import sparksync.gui  # noqa: F401 - its refcount guard keeps a long pyqtgraph run alive on PySide6 6.12.0
from sparksync.core.telemetry.dashboard_series import sample_values
from sparksync_agent.protocol import InterfaceKind, Sample
from tests.core.dashboard_samples import FABRIC, ROCE, memory, nic, rdma

HEARTBEAT_MS = 5
SERIES_PER_NODE = 6  # memory used/total, fabric rx/tx, RDMA rx/tx


def run_event_loop(seconds: float) -> None:
    """Let Qt run for ``seconds`` (the benchmark's own wait: no sleeping on the GUI thread)."""
    loop = QEventLoop()
    QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()


class SimulatedNodes(QObject):
    """``nodes`` DGX Sparks sampling at ``hz``, each a random walk around a working point."""

    sample_ready = Signal(str, object)

    def __init__(self, nodes: int = 8, hz: float = 10.0, seed: int = 7):
        super().__init__()
        self.names = [f"spark-{i + 1:02d}" for i in range(nodes)]
        self.hz = hz
        self.sent = 0
        self._random = random.Random(seed)
        self._state = {name: [40e9 + 5e9 * i, 5e9, 5e9] for i, name in enumerate(self.names)}
        self._seq = dict.fromkeys(self.names, 0)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def history(self, seconds: float, end: float) -> Iterator[tuple[str, Sample]]:
        """``seconds`` of past samples per node ending at ``end`` (to fill the window first)."""
        count = int(seconds * self.hz)
        for i in range(count):
            ts = end - (count - i) / self.hz
            for name in self.names:
                yield name, self._sample(name, ts)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="perf-simulated-nodes", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10.0)
            self._thread = None

    def _run(self) -> None:
        period = 1.0 / self.hz
        due = time.monotonic()
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            now = time.time()
            for i, name in enumerate(self.names):
                self.sample_ready.emit(name, self._sample(name, now + i * 1e-4))
                self.sent += 1
            due += period

    def _sample(self, name: str, ts: float) -> Sample:
        used, rx, tx = self._walk(name)
        self._seq[name] += 1
        return Sample(
            seq=self._seq[name],
            ts=ts,
            memory=memory(used, 128e9),
            net=[nic(FABRIC, rx, tx, InterfaceKind.fabric)],
            rdma=[rdma(ROCE, rx * 2, tx * 2)],
        )

    def _walk(self, name: str) -> list[float]:
        state = self._state[name]
        state[0] = min(120e9, max(1e9, state[0] + self._random.gauss(0, 0.2e9)))
        for j in (1, 2):
            state[j] = min(24e9, max(0.0, state[j] + self._random.gauss(0, 0.5e9)))
        return state


class Heartbeat(QObject):
    """A precise 5 ms timer on the GUI thread, recording how late each beat fired."""

    def __init__(self, period_ms: int = HEARTBEAT_MS):
        super().__init__()
        self.period_s = period_ms / 1000
        self.lateness_ms: list[float] = []
        self.beats: list[tuple[float, float]] = []  # (perf_counter when it fired, lateness ms)
        self._last: float | None = None
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(period_ms)
        self._timer.timeout.connect(self._on_timer_timeout)

    def start(self) -> None:
        self.lateness_ms.clear()
        self.beats.clear()
        self._last = None
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def _on_timer_timeout(self) -> None:
        now = time.perf_counter()
        if self._last is not None:
            late = max(0.0, (now - self._last - self.period_s) * 1000)
            self.lateness_ms.append(late)
            self.beats.append((now, late))
        self._last = now


class NaiveDashboard(QWidget):
    """The anchor: the same plots, fed by appending to lists and redrawn with the full lists."""

    def __init__(self, window_s: float = 600.0, redraw_hz: int = 30):
        super().__init__()
        self.window_s = window_s
        self.frames = 0
        self._lists: dict[tuple[str, str], tuple[list[float], list[float], pg.PlotDataItem]] = {}
        self._latest = -math.inf
        self._changed = False
        layout = QGridLayout(self)
        self._plots = {}
        for i, key in enumerate(("mem", "net", "rdma")):
            plot = pg.PlotWidget(axisItems={"bottom": pg.DateAxisItem()})
            plot.setTitle(key)
            layout.addWidget(plot, i // 2, i % 2)
            self._plots[key] = plot
        self._timer = QTimer(self)
        self._timer.setInterval(int(1000 / redraw_hz))
        self._timer.timeout.connect(self._on_timer_timeout)
        self._timer.start()

    def add(self, node: str, sample: Sample) -> None:
        for name, value in sample_values(sample).items():
            key = (node, name)
            if key not in self._lists:
                curve = self._plots[name.split(".")[0]].plot(pen=pg.mkPen(width=1))  # as the dashboard draws
                self._lists[key] = ([], [], curve)
            xs, ys, _ = self._lists[key]
            xs.append(sample.ts)
            ys.append(value / 1e9 if name.startswith("mem") else value)
        self._latest = max(self._latest, sample.ts)
        self._changed = True

    def _on_timer_timeout(self) -> None:
        if not self._changed:
            return
        self._changed = False
        for xs, ys, curve in self._lists.values():
            curve.setData(xs, ys)
        for plot in self._plots.values():
            plot.setXRange(self._latest - self.window_s, self._latest, padding=0)
        self.frames += 1


def stall_summary(lateness_ms: list[float]) -> dict[str, float]:
    values = np.array(lateness_ms) if lateness_ms else np.array([0.0])
    return {
        "beats": float(len(lateness_ms)),
        "p50_ms": float(np.percentile(values, 50)),
        "p99_ms": float(np.percentile(values, 99)),
        "max_ms": float(values.max()),
    }
