"""All supervised ranks on this node: start, list, stop, logs, persistence and re-attachment."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import time
from pathlib import Path

from sparksync_agent.engines.detect import search_path
from sparksync_agent.protocol import (
    NAME_PATTERN,
    RankLaunch,
    RankStart,
    RankState,
    RankStatus,
    WorkloadFigures,
    WorkloadList,
    WorkloadStatus,
)
from sparksync_agent.supervisor import errors
from sparksync_agent.supervisor.figures import FiguresBoard, scrape_rank
from sparksync_agent.supervisor.ports import holder, taken_ports
from sparksync_agent.supervisor.rank import DEFAULT_STOP_GRACE_S, Rank, finish_unwatched
from sparksync_agent.supervisor.records import WORKLOADS_FILE, RankRecord, Store
from sparksync_agent.supervisor.spare import KeeperLauncher

log = logging.getLogger(__name__)

SCRAPE_S = 1.0  # tokens/s sources are read at most once a second


class Supervisor:
    """Owns the node's workload ranks. They outlive clients and the agent itself."""

    def __init__(self, state_dir: Path):
        self.root = Path(state_dir) / "workloads"
        self.store = Store(self.root / WORKLOADS_FILE)
        self.ranks: dict[tuple[str, str], Rank] = {}
        self.board = FiguresBoard()
        self.launcher = KeeperLauncher(self.root)
        self._scraper: asyncio.Task | None = None
        self._work_started = asyncio.Event()

    # --- lifetime ------------------------------------------------------------------

    async def start(self) -> None:
        """Re-attach to ranks that still run; report the ones that ended meanwhile."""
        for record in self.store.load():
            rank = self._make_rank(record)
            if rank.record.state.finished:
                rank.pump()
                continue
            if rank.alive():
                log.info(
                    "re-attached to %s/%s (keeper pid %s)", record.workload_id, rank.name, record.keeper_pid
                )
                rank.pump()
                self._watch(rank)
            else:
                finish_unwatched(rank)
        self._save()
        self.launcher.prepare()  # the first rank's keeper is then forked, not started from scratch
        self._scraper = asyncio.create_task(self._scrape_forever(), name="tokens-scraper")

    async def close(self) -> None:
        """Stop watching; the ranks keep running and a new agent re-attaches to them."""
        tasks = [r.task for r in self.ranks.values() if r.task is not None]
        if self._scraper is not None:
            tasks.append(self._scraper)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for rank in self.ranks.values():
            rank.tail.close()
        self.launcher.close()
        self._save()

    # --- requests ---------------------------------------------------------------------

    def start_rank(self, request: RankStart) -> RankStatus:
        launch = _with_engine_path(request.launch)
        _check_name(request.workload_id, "workload id")
        _check_name(launch.process_name, "process name (group.rank.role)")
        key = (request.workload_id, launch.process_name)
        existing = self.ranks.get(key)
        if existing is not None and not existing.record.state.finished:
            raise errors.AlreadyRunning(
                f"{launch.process_name} of workload {request.workload_id} is already {existing.record.state.value} "
                "on this node; stop it first"
            )
        _check_command(launch.argv[0], launch.env, launch.cwd)
        _check_ports(launch.ports)
        if existing is not None:
            existing.tail.close()
        rank = self._make_rank(
            RankRecord(workload_id=request.workload_id, launch=launch, state=RankState.starting)
        )
        try:
            rank.spawn()
        except OSError as exc:
            del self.ranks[key]
            raise errors.SupervisorError(f"the agent could not start a process: {exc}") from exc
        self._watch(rank)
        self._work_started.set()
        return rank.status()

    def workloads(self) -> WorkloadList:
        ids = sorted({wid for wid, _ in self.ranks})
        return WorkloadList(workloads=[self.workload(wid) for wid in ids])

    def workload(self, workload_id: str) -> WorkloadStatus:
        ranks = self._ranks_of(workload_id)
        return WorkloadStatus(workload_id=workload_id, ranks=[r.status() for r in ranks])

    async def stop(self, workload_id: str, grace_s: float = DEFAULT_STOP_GRACE_S) -> WorkloadStatus:
        """Stop every rank of the workload on this node, later stages first."""
        ranks = sorted(self._ranks_of(workload_id), key=lambda r: -r.record.launch.stage)
        await asyncio.gather(*(r.stop(grace_s) for r in ranks))
        return self.workload(workload_id)

    def forget(self, workload_id: str) -> None:
        """Drop a finished workload: from the list, and its log files from the disk."""
        ranks = self._ranks_of(workload_id)
        if any(not r.record.state.finished for r in ranks):
            raise errors.StillRunning(f"workload {workload_id} still runs here; stop it first")
        for rank in ranks:
            del self.ranks[(workload_id, rank.name)]
        self._save()
        shutil.rmtree(self.root / workload_id, ignore_errors=True)

    def rank(self, workload_id: str, name: str | None) -> Rank:
        ranks = self._ranks_of(workload_id)
        if name is None:
            if len(ranks) == 1:
                return ranks[0]
            names = ", ".join(r.name for r in ranks)
            raise errors.SupervisorError(
                f"workload {workload_id} has several processes here; name one of: {names}"
            )
        for rank in ranks:
            if rank.name == name:
                return rank
        raise errors.UnknownWorkload(f"workload {workload_id} has no process {name!r} on this node")

    # --- internals ------------------------------------------------------------------------

    def _make_rank(self, record: RankRecord) -> Rank:
        rank_dir = self.root / record.workload_id / record.launch.process_name
        rank = Rank(record, rank_dir, on_change=self._on_rank_change, launcher=self.launcher)
        self.ranks[(record.workload_id, rank.name)] = rank
        return rank

    def _watch(self, rank: Rank) -> None:
        rank.task = asyncio.create_task(rank.supervise(), name=f"rank:{rank.record.workload_id}/{rank.name}")

    def _ranks_of(self, workload_id: str) -> list[Rank]:
        ranks = [r for (wid, _), r in self.ranks.items() if wid == workload_id]
        if not ranks:
            raise errors.UnknownWorkload(f"no workload {workload_id!r} on this node")
        return ranks

    def _on_rank_change(self) -> None:
        self._save()
        self._drop_ended_figures()
        if any(r.record.state is RankState.starting for r in self.ranks.values()):
            self._work_started.set()  # wakes the idle tokens scraper (a restart, a new rank)

    def _drop_ended_figures(self) -> None:
        """A rank that stopped running leaves the board at once, not at the scraper's next round.

        Otherwise the samples of up to a second after its end would still carry its
        tokens/s, and a baseline read at its end would miss figures that come later.
        """
        figures = self.board.figures
        if figures is None:
            return
        live = {(r.record.workload_id, r.name) for r in self.ranks.values()
                if r.record.state in (RankState.starting, RankState.ready)}  # fmt: skip
        kept = [f for f in figures if (f.workload_id, f.name) in live]
        if len(kept) != len(figures):
            self.board.figures = kept or None

    def _save(self) -> None:
        self.store.save([r.record for r in self.ranks.values()])

    async def _scrape_forever(self) -> None:
        """Refresh the tokens/s figures once a second while ranks run; idle otherwise."""
        while True:
            running = [
                r for r in self.ranks.values() if r.record.state in (RankState.starting, RankState.ready)
            ]
            if not running:
                self.board.figures = None
                self._work_started.clear()
                await self._work_started.wait()
                continue
            began = time.monotonic()
            await asyncio.gather(*(scrape_rank(r) for r in running if r.prom is not None))
            figures: list[WorkloadFigures] = [f for f in (r.figures() for r in running) if f is not None]
            self.board.figures = figures or None
            await asyncio.sleep(max(0.0, SCRAPE_S - (time.monotonic() - began)))


def _check_name(name: str, what: str) -> None:
    if not re.match(NAME_PATTERN, name):
        raise errors.InvalidName(
            f"the {what} {name!r} must be 1-80 letters, digits, '.', '_' or '-', starting with a letter or "
            "digit (it names a directory on the node)"
        )


def _with_engine_path(launch: RankLaunch) -> RankLaunch:
    """The launch with the engine directories on its PATH (``~/.local/bin`` and the like).

    Engine detection looks there, and `sparksync engine install` puts binaries
    there; an agent run by systemd often lacks them on its own PATH, so a rank
    would be refused for an engine the node reports as present.
    """
    path = search_path(launch.env.get("PATH", os.environ.get("PATH", os.defpath)))
    return launch.model_copy(update={"env": {**launch.env, "PATH": path}})


def _check_command(program: str, env: dict[str, str], cwd: str | None) -> None:
    if cwd is not None and not os.path.isdir(cwd):
        raise errors.CommandNotFound(f"the working directory {cwd} does not exist on this node")
    path = env.get("PATH", os.environ.get("PATH", os.defpath))
    if "/" in program:
        found = os.path.join(cwd or "", program) if not os.path.isabs(program) else program
        if os.access(found, os.X_OK) and os.path.isfile(found):
            return
    elif shutil.which(program, path=path):
        return
    raise errors.CommandNotFound(
        f"{program!r} is not an executable on this node (PATH={path}); install the engine or give its full path"
    )


def _check_ports(ports: list[int]) -> None:
    taken = taken_ports(ports)
    if taken:
        who = [f"{port} (held by {holder(port)})" if holder(port) else str(port) for port in taken]
        raise errors.PortInUse(
            f"port {', '.join(who)} is already in use on this node; stop what holds it or pick another port"
        )
