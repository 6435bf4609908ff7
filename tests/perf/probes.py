"""Measuring instruments for the benchmarks: process CPU and RSS, a streaming
SSE client that times every sample, and loopback round-trip anchors."""

from __future__ import annotations

import contextlib
import ipaddress
import math
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import httpx
import psutil
from httpx_sse import connect_sse

from sparksync_agent.protocol import Sample

MB = 1024 * 1024


def cpu_seconds(proc: psutil.Process) -> float:
    """User plus system CPU time of the process itself (not the benchmark's)."""
    times = proc.cpu_times()
    return times.user + times.system


@dataclass
class CpuWindow:
    """CPU a process used over a wall-clock window, as CPU-seconds per minute."""

    cpu_s: float
    wall_s: float

    @property
    def per_minute(self) -> float:
        return self.cpu_s / self.wall_s * 60.0

    @property
    def percent_of_core(self) -> float:
        return self.cpu_s / self.wall_s * 100.0


def measure_cpu(
    procs: Sequence[psutil.Process], seconds: float, wait: Callable[[float], None]
) -> list[CpuWindow]:
    """CPU of each process over the same ``seconds``; ``wait`` does the caller's housekeeping meanwhile."""
    before, t0 = [cpu_seconds(p) for p in procs], time.monotonic()
    wait(seconds)
    after, t1 = [cpu_seconds(p) for p in procs], time.monotonic()
    return [CpuWindow(b - a, t1 - t0) for a, b in zip(before, after, strict=True)]


# What merely waking up costs here: a Python asyncio loop that does nothing but sleep.
# On a VM each timer wake-up is dear; this shows how much of the agent's figure is that.
_IDLE_LOOP = """
import asyncio, sys
async def main(period):
    while True:
        await asyncio.sleep(period)
asyncio.run(main(1.0 / float(sys.argv[1])))
"""


@contextlib.contextmanager
def idle_loop(hz: float) -> Iterator[psutil.Process]:
    """A bare asyncio loop waking ``hz`` times a second, in its own process."""
    proc = subprocess.Popen([sys.executable, "-c", _IDLE_LOOP, f"{hz:g}"])
    try:
        yield psutil.Process(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); exact enough for thousands of points."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var_x = sum((x - mean_x) ** 2 for x, _ in points)
    cov = sum((x - mean_x) * (y - mean_y) for x, y in points)
    return cov / var_x if var_x else 0.0


class RssRecorder:
    """Samples a process's RSS every ``every_s`` seconds on a background thread."""

    def __init__(self, proc: psutil.Process, every_s: float):
        self._proc, self._every_s = proc, every_s
        self.points: list[tuple[float, int]] = []  # (seconds since start, rss bytes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="perf-rss", daemon=True)
        self._t0 = time.monotonic()

    def start(self) -> RssRecorder:
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        self._record()  # the end point is always there, whatever the period

    def _record(self) -> None:
        try:
            self.points.append((time.monotonic() - self._t0, self._proc.memory_info().rss))
        except psutil.Error:
            pass  # the process is gone; the points so far stand

    def _run(self) -> None:
        deadline = time.monotonic()
        while not self._stop.is_set():
            self._record()
            deadline += self._every_s
            self._stop.wait(max(0.0, deadline - time.monotonic()))


@dataclass
class Received:
    seq: int
    ts: float  # Sample.ts: when the agent took the sample
    held_at: float  # time.time() once the client has parsed it
    size: int  # bytes of the event's data (the sample's JSON)

    @property
    def latency_s(self) -> float:
        return self.held_at - self.ts


class BackgroundLoop:
    """start()/stop() for the probes that run ``_run`` on a daemon thread until ``_stop`` is set."""

    thread_name = "perf-loop"
    _stop: threading.Event
    _thread: threading.Thread | None

    def start(self):
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10.0)


@dataclass
class SampleStream(BackgroundLoop):
    """One SSE client on a background thread that reads every sample, as the GUI would.

    stop() returns after the next event (a sample period at most), so the agent must still be up.
    """

    client: httpx.Client
    received: list[Received] = field(default_factory=list)
    lost_events: int = 0
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    thread_name = "perf-sse-client"

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def since(self, wall_time: float) -> list[Received]:
        return [r for r in self.received if r.ts >= wall_time]

    def _run(self) -> None:
        try:
            with connect_sse(self.client, "GET", "/v1/telemetry/stream") as source:
                for event in source.iter_sse():
                    if event.event == "sample":
                        sample = Sample.model_validate_json(event.data)
                        held_at = time.time()
                        self.received.append(Received(sample.seq, sample.ts, held_at, len(event.data)))
                    elif event.event == "lost":
                        self.lost_events += 1
                    if self._stop.is_set():
                        return
        except BaseException as exc:  # noqa: BLE001 - reported by the benchmark, not lost in a thread
            if not self._stop.is_set():
                self.error = exc


def gaps(received: Sequence[Received]) -> int:
    """Samples missing between the first and the last one received."""
    seqs = [r.seq for r in received]
    return (seqs[-1] - seqs[0] + 1 - len(seqs)) if seqs else 0


# A separate process, like the agent: a same-process echo thread would measure thread
# hand-offs, not what a client pays to reach another process over loopback.
_ECHO_SERVER = """
import socket, sys
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
conn, _ = server.accept()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while data := conn.recv(65536):
    conn.sendall(data)
"""


def tcp_echo_round_trips(count: int, payload: bytes = b"x" * 64) -> list[float]:
    """Round trips of a small message to an echo process over loopback TCP: the floor
    under any request/response latency on this machine."""
    echo = subprocess.Popen([sys.executable, "-c", _ECHO_SERVER], stdout=subprocess.PIPE)
    try:
        port = int(echo.stdout.readline())
        with socket.create_connection(("127.0.0.1", port), timeout=5.0) as conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return [_round_trip(conn, payload) for _ in range(count)]
    finally:
        echo.kill()
        echo.wait()
        echo.stdout.close()


def _round_trip(conn: socket.socket, payload: bytes) -> float:
    t0 = time.perf_counter()
    conn.sendall(payload)
    left = len(payload)
    while left:
        chunk = conn.recv(left)
        if not chunk:
            raise ConnectionError("the echo process closed the connection early")
        left -= len(chunk)
    return time.perf_counter() - t0


def request_latencies(client: httpx.Client, path: str, count: int) -> list[float]:
    """Wall time of ``count`` GETs on one keep-alive connection."""
    times: list[float] = []
    for _ in range(count):
        t0 = time.perf_counter()
        client.get(path).raise_for_status()
        times.append(time.perf_counter() - t0)
    return times


def non_loopback_sockets(proc: psutil.Process) -> list[str]:
    """The process's inet sockets bound or connected anywhere but loopback (should be none)."""
    bad = []
    for conn in proc.net_connections(kind="inet"):
        for addr in (conn.laddr, conn.raddr):
            if addr and not ipaddress.ip_address(addr.ip).is_loopback:
                bad.append(f"{conn.laddr} -> {conn.raddr or '-'} ({conn.status})")
                break
    return bad
