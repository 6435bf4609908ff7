"""Run a group's generated launches for real, as the agent's supervisor will: stage by stage.

Each launch runs with its own argv, environment (on top of ours), working
directory and log file, in its own process group; the next stage starts only
when every rank of this one passes its generated readiness probe. Whatever
happens, every process group is stopped (SIGTERM, then SIGKILL) and reaped.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from sparksync.core.workloads.launch_spec import RankLaunch, ReadinessProbe, TokensSource
from sparksync.core.workloads.launches import GroupLaunch

STOP_GRACE_S = 5.0
# The engines here are tiny and local; a launch's own (production) timeout is far longer.
TEST_READY_TIMEOUT_S = 60.0


@dataclass
class RunningRank:
    launch: RankLaunch
    proc: subprocess.Popen
    log_path: Path

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def start(launch: RankLaunch, log_dir: Path) -> RunningRank:
    log_path = log_dir / launch.log_name
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            launch.argv, env={**os.environ, **launch.env}, cwd=launch.cwd, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    return RunningRank(launch, proc, log_path)


def wait_ready(rank: RunningRank, timeout: float = TEST_READY_TIMEOUT_S) -> float:
    """Poll the launch's own readiness probe; seconds it took. Fails with the log if the rank dies."""
    probe, began = rank.launch.readiness, time.monotonic()
    deadline = began + min(timeout, probe.timeout_s)
    while time.monotonic() < deadline:
        if rank.proc.poll() is not None:
            raise AssertionError(
                f"{rank.launch.role} exited with {rank.proc.returncode}:\n{rank.log_text()[-2000:]}"
            )
        if probe_once(probe, rank):
            return time.monotonic() - began
        time.sleep(probe.interval_s)
    raise AssertionError(
        f"{rank.launch.role} not ready ({probe.kind}) in {timeout:.0f} s:\n{rank.log_text()[-2000:]}"
    )


def probe_once(probe: ReadinessProbe, rank: RunningRank) -> bool:
    if probe.kind == "http":
        try:
            return httpx.get(f"http://{probe.host}:{probe.port}{probe.path}", timeout=2.0).status_code == 200
        except httpx.TransportError:
            return False
    if probe.kind == "tcp":
        try:
            with socket.create_connection((probe.host, probe.port), timeout=1.0):
                return True
        except OSError:
            return False
    if probe.kind == "log":
        return re.search(probe.pattern, rank.log_text(), re.MULTILINE) is not None
    return rank.proc.poll() is None


@contextmanager
def running_group(group: GroupLaunch, log_dir: Path) -> Iterator[list[RunningRank]]:
    """Start every stage in order, each once the previous one is ready; stop all on the way out."""
    started: list[RunningRank] = []
    try:
        for stage in group.stages:
            ranks = [start(launch, log_dir) for launch in stage]
            started += ranks
            for rank in ranks:
                wait_ready(rank)
        yield started
    finally:
        for rank in reversed(started):
            rank.stop()


def read_counters(source: TokensSource) -> dict[str, float]:
    """The tokens source's counters, from the engine's Prometheus text exposition."""
    text = httpx.get(f"http://{source.host}:{source.port}{source.path}", timeout=5.0).raise_for_status().text
    values = {}
    for name in filter(None, (source.decode_counter, source.prefill_counter)):
        match = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})?\s+(\S+)$", text, re.MULTILINE)
        if match is None:
            raise AssertionError(f"counter {name} missing from {source.path}:\n{text[:1000]}")
        values[name] = float(match.group(1))
    return values


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
