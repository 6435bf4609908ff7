"""One supervised rank: start, readiness, exit, stop and restarts, over its keeper process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from sparksync_agent.protocol import RankState, RankStatus, WorkloadFigures
from sparksync_agent.supervisor import restart
from sparksync_agent.supervisor.files import (
    EXIT_FILE,
    KEEPER_FILE,
    ExitRecord,
    KeeperSpec,
    read_exit,
    write_json,
)
from sparksync_agent.supervisor.logring import LogRing
from sparksync_agent.supervisor.logtail import LogTail
from sparksync_agent.supervisor.probes import LogReadiness, probe_network
from sparksync_agent.supervisor.processes import kill_tree, signal_group, signal_tree
from sparksync_agent.supervisor.procid import same_process, start_ticks
from sparksync_agent.supervisor.records import RankRecord
from sparksync_agent.supervisor.spare import KeeperLauncher, start_fresh
from sparksync_agent.supervisor.tokens import LogTokens, PrometheusTokens

log = logging.getLogger(__name__)

POLL_S = 0.2  # how often a running rank's log and liveness are read
# While a rank starts, the next stage waits on its readiness: look more often, probes at their own interval.
STARTING_POLL_S = 0.05
DEFAULT_STOP_GRACE_S = 10.0
LAST_LINES = 20
STOP_ARGV_TIMEOUT_S = 60.0
RUNNING = (RankState.starting, RankState.ready, RankState.stopping)


class Rank:
    """One process of a workload on this node, and its log."""

    def __init__(
        self,
        record: RankRecord,
        rank_dir: Path,
        on_change: Callable[[], None],
        launcher: KeeperLauncher | None = None,
    ):
        self.record = record
        self._launcher = launcher
        self.dir = rank_dir
        self.ring = LogRing()
        self.tail = LogTail(rank_dir)
        self.proc: subprocess.Popen | None = None  # set when this agent is the keeper's parent
        self.task: asyncio.Task | None = None
        self._on_change = on_change
        self._stop_asked = asyncio.Event()
        self._stop_grace = DEFAULT_STOP_GRACE_S
        self._finished = asyncio.Event()
        source, probe = record.launch.tokens_source, record.launch.readiness
        self.prom = PrometheusTokens(source) if source.kind == "prometheus" else None
        self.log_tokens = LogTokens(source) if source.kind == "log" else None
        self.log_ready = LogReadiness(probe.pattern) if probe.kind == "log" and probe.pattern else None
        if record.state.finished:
            self._finished.set()

    # --- what it reports -------------------------------------------------------

    @property
    def name(self) -> str:
        return self.record.launch.process_name

    @property
    def running(self) -> bool:
        return self.record.state in RUNNING

    def status(self) -> RankStatus:
        rec, launch = self.record, self.record.launch
        return RankStatus(
            workload_id=rec.workload_id, name=self.name, group=launch.group, rank=launch.rank, role=launch.role,
            state=rec.state, pid=rec.keeper_pid if self.running else None, attempt=rec.attempt,
            started_at=rec.started_at, ready_at=rec.ready_at, ended_at=rec.ended_at, exit_code=rec.exit_code,
            exit_signal=rec.exit_signal, message=rec.message, last_lines=rec.last_lines,
            log_last_seq=self.ring.last_seq, ports=launch.ports, argv=launch.argv,
        )  # fmt: skip

    def figures(self) -> WorkloadFigures | None:
        if self.record.state not in (RankState.starting, RankState.ready):
            return None
        launch = self.record.launch
        figures = WorkloadFigures(
            workload_id=self.record.workload_id, name=self.name, group=launch.group, rank=launch.rank,
            role=launch.role, state=self.record.state, scope=launch.tokens_source.scope,
        )  # fmt: skip
        if self.prom is not None:
            figures.decode_tps, figures.prefill_tps = self.prom.decode_rate, self.prom.prefill.rate
        if self.log_tokens is not None:
            found = self.log_tokens.figures
            figures.decode_tps, figures.step, figures.loss = found.tokens_per_s, found.step, found.loss
        return figures

    # --- starting ----------------------------------------------------------------

    def spawn(self) -> None:
        """Start the keeper for a new attempt; raises OSError when it cannot start."""
        launch, rec = self.record.launch, self.record
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        (self.dir / EXIT_FILE).unlink(missing_ok=True)
        write_json(self.dir / KEEPER_FILE, KeeperSpec(argv=launch.argv, env=launch.env, cwd=launch.cwd))
        if self._launcher is not None:
            pid, self.proc = self._launcher.launch(self.dir)
        else:
            self.proc = start_fresh(self.dir)
            pid = self.proc.pid
        rec.keeper_pid, rec.keeper_ticks = pid, start_ticks(pid)
        rec.started_at, rec.ready_at, rec.ended_at = time.time(), None, None
        rec.exit_code = rec.exit_signal = rec.message = None
        rec.last_lines, rec.stop_requested = [], False
        if self.log_ready is not None:
            self.log_ready.matched = False
        self._set(RankState.starting)
        log.info(
            "started %s/%s (attempt %d, keeper pid %d)",
            rec.workload_id,
            self.name,
            rec.attempt,
            pid,
        )

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        rec = self.record
        return (
            rec.keeper_pid is not None
            and rec.keeper_ticks is not None
            and same_process(rec.keeper_pid, rec.keeper_ticks)
        )

    # --- the life of the rank ------------------------------------------------------

    async def supervise(self) -> None:
        """Watch attempts until the rank has finished; restart per its policy."""
        try:
            while True:
                await self._watch_attempt()
                if self.record.state is not RankState.failed or not await self._restart_after_failure():
                    break
        finally:
            if self.record.state.finished:
                self.tail.close()
                self._finished.set()
                self.ring.wake()

    async def _watch_attempt(self) -> None:
        probe, began = self.record.launch.readiness, time.monotonic()
        next_probe = began
        while True:
            self.pump()
            if self._stop_asked.is_set() or self.record.state is RankState.stopping:
                await self._terminate()
                return self._classify_end()
            if not self.alive():
                self._sweep_group()
                return self._classify_end()
            if self.record.state is RankState.starting:
                now = time.monotonic()
                if now - began > probe.timeout_s:
                    self.record.message = f"not ready after {probe.timeout_s:g} s ({probe.kind} probe)"
                    await self._terminate(ready_timeout=True)
                    return self._classify_end()
                if now >= next_probe:
                    next_probe = now + probe.interval_s
                    if await self._probe_passes():
                        self.record.ready_at = time.time()
                        self._set(RankState.ready)
            tick = STARTING_POLL_S if self.record.state is RankState.starting else POLL_S
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop_asked.wait(), tick)

    async def _probe_passes(self) -> bool:
        probe = self.record.launch.readiness
        if probe.kind == "process":
            return True
        if self.log_ready is not None:  # the probe is a log pattern
            return self.log_ready.matched
        return await probe_network(probe)

    def pump(self) -> None:
        """Move new output lines into the ring, the log probe and the log tokens source."""
        lines = self.tail.read()
        for seq, text in lines:
            self.ring.append(seq, text)
            if self.log_ready is not None:
                self.log_ready.feed(text)
            if self.log_tokens is not None:
                self.log_tokens.feed(text)
        if lines:
            self.ring.wake()

    # --- stopping ----------------------------------------------------------------------

    async def stop(self, grace_s: float = DEFAULT_STOP_GRACE_S) -> None:
        """Ask the rank to stop and wait until it has (SIGKILL after ``grace_s``)."""
        if self.record.state.finished:
            return
        self._stop_grace = grace_s
        self.record.stop_requested = True
        self._stop_asked.set()
        await self._finished.wait()

    async def _terminate(self, ready_timeout: bool = False) -> None:
        """SIGTERM to the whole tree, SIGKILL to whatever is left after the grace."""
        rec = self.record
        if not ready_timeout:
            rec.stop_requested = True
            self._set(RankState.stopping)
        if rec.keeper_pid is None:
            return
        if self.alive():
            signal_tree(rec.keeper_pid, signal.SIGTERM)
            deadline = time.monotonic() + self._stop_grace
            while self.alive() and time.monotonic() < deadline:
                self.pump()
                await asyncio.sleep(0.05)
        if self.alive():
            log.warning(
                "%s/%s did not stop within %.0f s; killing it", rec.workload_id, self.name, self._stop_grace
            )
            kill_tree(rec.keeper_pid)
            while self.alive():
                await asyncio.sleep(0.02)
        self.pump()
        await self._run_stop_argv()

    def _sweep_group(self) -> None:
        """The keeper just ended: anything left in its group lost its keeper (killed outright).

        The group id cannot have been reused yet: it stays taken while any member lives.
        """
        if self.record.keeper_pid is not None:
            signal_group(self.record.keeper_pid, signal.SIGKILL)

    async def _run_stop_argv(self) -> None:
        argv = self.record.launch.stop_argv
        if not argv:
            return
        env = {**os.environ, **self.record.launch.env}
        try:
            await asyncio.to_thread(
                subprocess.run, argv, env=env, cwd=self.record.launch.cwd, timeout=STOP_ARGV_TIMEOUT_S,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("the stop command of %s/%s failed: %s", self.record.workload_id, self.name, exc)

    # --- the end of an attempt -------------------------------------------------------

    def _classify_end(self) -> None:
        self.pump()
        rec, ended = self.record, read_exit(self.dir)
        rec.ended_at = ended.ended_at if ended else time.time()
        rec.exit_code = ended.exit_code if ended else None
        rec.exit_signal = ended.exit_signal if ended else None
        if rec.stop_requested and rec.message is None:
            self._set(RankState.stopped)
        elif ended is not None and ended.exit_code == 0 and rec.message is None:
            self._set(RankState.exited)
        else:
            rec.message = rec.message or describe_end(ended)
            rec.last_lines = self.ring.tail(LAST_LINES)
            rec.failures.append(time.time())
            self._set(RankState.failed)

    async def _restart_after_failure(self) -> bool:
        rec, policy, now = self.record, self.record.launch.restart, time.time()
        rec.failures = restart.failures_in_window(rec.failures, now, policy)
        delay = restart.next_delay(rec.failures, now, policy)
        if delay is None:
            if policy.mode == "on-failure":
                rec.message = f"{rec.message}; {restart.give_up_message(rec.failures, now, policy)}"
                self._set(RankState.failed)
            return False
        self._set(RankState.restarting)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop_asked.wait(), delay)
        if self._stop_asked.is_set():
            rec.message = None
            self._set(RankState.stopped)
            return False
        rec.attempt += 1
        try:
            self.spawn()
        except OSError as exc:
            rec.message = f"cannot start the keeper process: {exc}"
            self._set(RankState.failed)
            return False
        return True

    def _set(self, state: RankState) -> None:
        self.record.state = state
        self._on_change()


def describe_end(ended: ExitRecord | None) -> str:
    if ended is None:
        return "the process ended without an exit status (its keeper was killed)"
    if ended.exit_signal:
        try:
            name = signal.Signals(ended.exit_signal).name
        except ValueError:
            name = str(ended.exit_signal)
        return f"killed by signal {ended.exit_signal} ({name})"
    if ended.exit_code == 127:
        return "exited with status 127 (command not found or could not run)"
    return f"exited with status {ended.exit_code}"


def finish_unwatched(rank: Rank) -> None:
    """A rank whose keeper ended while no agent watched: report how it ended, if known."""
    rank.pump()  # what it wrote while no agent watched, for its last lines
    if read_exit(rank.dir) is None:
        rank.record.ended_at = rank.record.ended_at or time.time()
        rank.record.message = "it ended while no agent was watching, and its exit status is unknown"
        rank._set(RankState.lost)
    else:
        rank._classify_end()
    rank.tail.close()
    rank._finished.set()
