"""Everything the Workloads panel and the tray do with workloads, Qt-free and blocking (call it from workers).

    control = WorkloadControl(lambda: FleetAgents(actions.fleet()))
    prepared = control.check(choice)              # reads the nodes; MemoryFitError with the numbers
    view = control.start(choice, on_progress)     # all or nothing, remembered for restart and the tray
    rows = control.watch_once()                   # every recorded workload's ranks; a failed rank stops the rest

The agents are made on first need, so a panel with nothing recorded never
opens SSH links or reads the keyring.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from sparksync_agent.protocol import LogPage

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.workloads import running
from sparksync.core.workloads.agents import NodeAgents
from sparksync.core.workloads.baseline import BaselineStore
from sparksync.core.workloads.errors import WorkloadError
from sparksync.core.workloads.fabric_settings import load_fabric_settings
from sparksync.core.workloads.last_workload import Launched, Launches
from sparksync.core.workloads.launch_choice import LaunchChoice, resolve_choice
from sparksync.core.workloads.orchestrator import POLL_S, Orchestrator, Prepared, ProgressCallback
from sparksync.core.workloads.recipe import Recipe
from sparksync.core.workloads.recipe_files import all_recipes
from sparksync.core.workloads.training_scaling import (
    GroupScaling,
    record_baselines,
    record_before_stop,
    scaling,
)
from sparksync.core.workloads.workload_store import WorkloadStore

log = logging.getLogger(__name__)


@dataclass
class WorkloadRow:
    """One recorded workload as its nodes report it now, with its decode rate when it runs."""

    view: running.WorkloadView
    decode_tps: float | None = None
    scaling: list[GroupScaling] = field(default_factory=list)  # its training groups' efficiency


class WorkloadControl:
    def __init__(
        self,
        agents: Callable[[], NodeAgents],
        store: WorkloadStore | None = None,
        launches: Launches | None = None,
        *,
        poll_s: float = POLL_S,
        stop_grace_s: float = running.DEFAULT_STOP_GRACE_S,
    ):
        self._make_agents = agents
        self._agents: NodeAgents | None = None
        self._agents_lock = threading.Lock()
        self.store = store if store is not None else WorkloadStore()
        self.launches = launches if launches is not None else Launches()
        self.poll_s = poll_s
        self.stop_grace_s = stop_grace_s
        self.baselines = BaselineStore()
        self._baseline_read: set[str] = set()  # ended workloads whose telemetry was read for a baseline

    @property
    def agents(self) -> NodeAgents:
        with self._agents_lock:
            if self._agents is None:
                self._agents = self._make_agents()
            return self._agents

    # --- choosing -------------------------------------------------------------------------------

    def recipes(self) -> tuple[dict[str, Recipe], list[str]]:
        """Built-ins and the user's recipe files; the files that could not be read, in words."""
        found, problems = all_recipes()
        return found, [str(p) for p in problems]

    def check(self, choice: LaunchChoice, on_progress: ProgressCallback | None = None) -> Prepared:
        """Read the nodes and check memory; raises (MemoryFitError with the numbers) before anything starts."""
        plan, recipes = resolve_choice(choice, self.recipes()[0])
        return self._orchestrator(on_progress).prepare(plan, recipes)

    # --- starting and stopping ------------------------------------------------------------------

    def start(
        self,
        choice: LaunchChoice,
        on_progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> running.WorkloadView:
        orchestrator = self._orchestrator(on_progress)
        plan, recipes = resolve_choice(choice, self.recipes()[0])
        prepared = orchestrator.prepare(plan, recipes)
        self.launches.add(prepared.workload_id, choice)  # the tray can stop it while it starts
        return orchestrator.start(prepared, cancel)

    def stop(self, workload_id: str) -> None:
        record = self.store.get(workload_id)
        # A one-node training run's figures become its setup's baseline before it goes.
        record_before_stop(self.agents, record, self.baselines)
        failed = running.stop(self.agents, record, self.stop_grace_s)
        if failed:
            detail = "; ".join(f"{node}: {error}" for node, error in failed.items())
            raise WorkloadError(
                f"workload {workload_id} could not be stopped everywhere ({detail}); try again."
            )

    def remove(self, workload_id: str) -> None:
        """Stop it, drop it and its logs from the nodes, and from the list."""
        self.stop(workload_id)
        running.forget(self.agents, self.store.get(workload_id))
        self.store.remove(workload_id)

    def choice_of(self, workload_id: str) -> LaunchChoice:
        choice = self.launches.choice(workload_id)
        if choice is None:
            raise WorkloadError(
                f"workload {workload_id} was not started from this app, so its settings are unknown; "
                "start it again from the recipe."
            )
        return choice

    def restart(
        self,
        workload_id: str,
        on_progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> running.WorkloadView:
        """Stop the workload, then start the same choice again (it gets a new id)."""
        choice = self.choice_of(workload_id)
        self.stop(workload_id)
        return self.start(choice, on_progress, cancel)

    def last(self) -> Launched | None:
        return self.launches.last()

    # --- watching -------------------------------------------------------------------------------

    def watch_once(self) -> list[WorkloadRow]:
        """Every recorded workload now; a workload with a failed rank has its other ranks stopped."""
        records = self.store.list()
        if not records:
            return []
        rows = []
        for record in records:
            current = running.view(self.agents, record)
            if running.enforce(self.agents, current, self.stop_grace_s):
                current = running.view(self.agents, record)
            rates = running.tokens(self.agents, record) if current.live() else running.WorkloadTokens()
            ended = current.state in ("exited", "stopped", "failed")
            if ended and record.workload_id not in self._baseline_read:
                self._baseline_read.add(record.workload_id)  # the node's history is read once, not per poll
                self._record_baselines(current)
            rows.append(WorkloadRow(current, rates.decode_tps, scaling(current, rates, self.baselines)))
        return rows

    def _record_baselines(self, current: running.WorkloadView) -> None:
        try:
            record_baselines(self.agents, current, self.baselines)
        except SparkSyncError as exc:  # the list still shows; the baseline waits for a readable file
            log.warning("no baseline recorded for %s: %s", current.workload_id, exc)

    def logs(self, workload_id: str, name: str, since: int = 0) -> LogPage:
        record = self.store.get(workload_id)
        ref = next((r for r in record.ranks if r.name == name), None)
        if ref is None:
            raise WorkloadError(f"workload {workload_id} has no process {name}.")
        return running.logs(self.agents, workload_id, ref, since)

    def _orchestrator(self, on_progress: ProgressCallback | None) -> Orchestrator:
        return Orchestrator(
            self.agents, self.store, fabric_settings=load_fabric_settings(), on_progress=on_progress,
            poll_s=self.poll_s, stop_grace_s=self.stop_grace_s,
        )  # fmt: skip
