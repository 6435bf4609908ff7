"""The workload operations of both faces, Qt-free and blocking (the GUI calls them from workers).

The Workloads panel, the tray, the dashboard's "Run a model on this
computer" and every ``sparksync workload`` / ``engine`` command go through
this one object; a CLI command only parses its options and prints what
comes back::

    control = WorkloadControl(actions.fleet)       # the agents: any node's, this computer's too
    prepared = control.check(choice)              # reads the nodes; MemoryFitError with the numbers
    view = control.start(choice, on_progress)     # all or nothing, remembered for restart and the tray
    view = control.start_plan(plan, recipes)      # the CLI's --nodes / --plan
    rows = control.rows()                         # every recorded workload, its tokens/s and scaling
    rows = control.watch_once()                   # the same; a failed rank stops the rest
    baselines = control.stop(workload_id)         # a one-node training run leaves its baseline
    control.install_engine(node, on_progress)     # llama.cpp on a node or on this computer

The agents are made on first need, so a panel with nothing recorded never
opens SSH links or reads the keyring.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sparksync_agent.protocol import EngineReport, LogPage

from sparksync.core.agents.client import LogItem
from sparksync.core.agents.link import NodeAgents
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.workloads import running
from sparksync.core.workloads.baseline import Baseline, BaselineStore
from sparksync.core.workloads.engine_install import InstallProgress, install_engine
from sparksync.core.workloads.errors import WorkloadError
from sparksync.core.workloads.fabric_settings import load_fabric_settings
from sparksync.core.workloads.last_workload import Launched, Launches
from sparksync.core.workloads.launch_choice import LaunchChoice, resolve_choice
from sparksync.core.workloads.orchestrator import POLL_S, Orchestrator, Prepared, ProgressCallback
from sparksync.core.workloads.plan import Plan
from sparksync.core.workloads.recipe import Recipe
from sparksync.core.workloads.recipe_files import all_recipes
from sparksync.core.workloads.training_scaling import (
    GroupScaling,
    record_baselines,
    record_before_stop,
    scaling,
)
from sparksync.core.workloads.reach import TunnelReach, open_workload
from sparksync.core.workloads.workload_store import Endpoint, RankRef, WorkloadRecord, WorkloadStore

if TYPE_CHECKING:
    from sparksync.core.models.copy import CopyEvent

log = logging.getLogger(__name__)


@dataclass
class WorkloadRow:
    """One recorded workload as its nodes report it now, with its decode rate when it runs."""

    view: running.WorkloadView
    decode_tps: float | None = None
    scaling: list[GroupScaling] = field(default_factory=list)  # its training groups' efficiency
    prefill_tps: float | None = None
    last: running.LastTokens | None = None  # an ended workload's last figure, from its nodes' history
    stale: bool = False  # failed or gone for longer than CLEAR_AFTER_S: left out of the default list

    def tokens_text(self) -> str:
        """Live tokens/s while it runs; once ended, the last figure its nodes recorded, with when."""
        if self.decode_tps is not None:
            return f"{self.decode_tps:,.1f}"
        if self.last is not None:
            return f"last {self.last.decode_tps:,.1f} ({time.strftime('%H:%M', time.localtime(self.last.at))})"
        return "-"


CLEAR_AFTER_S = 3600.0  # a failed or gone workload leaves the default list after an hour
CLEARABLE = ("failed", "gone")  # what `workload prune` removes, and the default list clears in time
ENDED = ("exited", "stopped", "failed", "gone")


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
        self._last_read: dict[str, running.LastTokens | None] = {}  # ended workloads' last tokens/s
        self._opened: dict[str, tuple[ExitStack, list[tuple[Endpoint, str]]]] = {}  # workload -> its tunnels

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
        *,
        copy_model: bool = False,
        on_copy: Callable[[CopyEvent], None] | None = None,
    ) -> running.WorkloadView:
        plan, recipes = resolve_choice(choice, self.recipes()[0])
        # Remembered once checked, before it starts: the tray can stop it while it starts.
        return self.start_plan(plan, recipes, on_progress, cancel,
                               on_prepared=lambda prepared: self.launches.add(prepared.workload_id, choice),
                               copy_model=copy_model, on_copy=on_copy)  # fmt: skip

    def start_plan(
        self,
        plan: Plan,
        recipes: Mapping[str, Recipe],
        on_progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        *,
        label: str | None = None,
        on_prepared: Callable[[Prepared], None] | None = None,
        copy_model: bool = False,
        on_copy: Callable[[CopyEvent], None] | None = None,
    ) -> running.WorkloadView:
        """Check the models and the nodes, then start every rank stage by stage; all or nothing.

        A recipe whose model is a store name needs it on every node of its groups: a node
        without it is named (ModelMissingError, with the copy's estimated time), or, with
        ``copy_model``, gets a verified copy first (``on_copy`` sees its progress). Each
        node's ranks then get that node's own path.
        """
        recipes, paths = self.models_first(plan, recipes, copy_model, on_copy)
        from sparksync.core.models.launch_check import resolve_launch  # the model code loads only when used

        orchestrator = self._orchestrator(on_progress)
        prepared = orchestrator.prepare(plan, recipes, label)
        if paths:
            prepared.groups = [
                group.model_copy(update={"ranks": [resolve_launch(r, paths) for r in group.ranks]})
                for group in prepared.groups
            ]
        if on_prepared is not None:
            on_prepared(prepared)
        return orchestrator.start(prepared, cancel)

    def models_first(
        self,
        plan: Plan,
        recipes: Mapping[str, Recipe],
        copy_model: bool = False,
        on_copy: Callable[[CopyEvent], None] | None = None,
    ) -> tuple[dict[str, Recipe], dict[str, dict[str, str]]]:
        """The recipes with store models as placeholders, and each model's path per node."""
        from sparksync.core.fleet.fleet import Fleet
        from sparksync.core.models.launch_check import ensure, placeholder, store_models, store_name
        from sparksync.core.models.nodes import ModelNodes, build_matrix

        used = {g.recipe for g in plan.groups}
        models = {name: r.model for name, r in recipes.items() if name in used}
        if not any(store_name(m) for m in models.values()):
            return dict(recipes), {}
        agents = self.agents
        if not isinstance(agents, Fleet):
            raise WorkloadError("a model named by its store name needs the fleet to find it on the nodes")
        nodes = ModelNodes(agents)
        known = set(build_matrix(nodes.listings(nodes.names())).models)
        nodes_of: dict[str, list[str]] = {}
        for group in plan.groups:
            nodes_of.setdefault(group.recipe, [])
            nodes_of[group.recipe] += [n for n in group.nodes if n not in nodes_of[group.recipe]]
        wanted = store_models(models, nodes_of, known)
        if not wanted:
            return dict(recipes), {}
        paths = ensure(nodes, wanted, copy_model, on_copy)
        changed = dict(recipes)
        for name, recipe in recipes.items():
            found = store_name(recipe.model) if name in used else None
            if found is not None and found[0] in paths:
                changed[name] = recipe.updated(model=placeholder(found[0]), served_name=recipe.served_name or found[0])
        return changed, paths

    def stop(self, workload_id: str, grace_s: float | None = None) -> list[Baseline]:
        """Stop every process of the workload; the one-node baselines its figures left, if any."""
        record = self.store.get(workload_id)
        # A one-node training run's figures become its setup's baseline before it goes.
        recorded = record_before_stop(self.agents, record, self.baselines)
        failed = running.stop(self.agents, record, self.stop_grace_s if grace_s is None else grace_s)
        if failed:
            detail = "; ".join(f"{node}: {error}" for node, error in failed.items())
            raise WorkloadError(
                f"workload {workload_id} could not be stopped everywhere ({detail}); try again."
            )
        return recorded

    def remove(self, workload_id: str, grace_s: float | None = None) -> list[Baseline]:
        """Stop it, drop it and its logs from the nodes, and from the list."""
        recorded = self.stop(workload_id, grace_s)
        running.forget(self.agents, self.store.get(workload_id))
        self.store.remove(workload_id)
        return recorded

    def record(self, workload_id: str) -> WorkloadRecord:
        return self.store.get(workload_id)

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
        return self.rows(enforce=True)

    def rows(self, *, enforce: bool = False) -> list[WorkloadRow]:
        """Every recorded workload as its nodes report it now, with its tokens/s and scaling.

        An ended one-node training run becomes its setup's baseline (its node's history is
        read once). ``enforce``: a workload with a failed rank has its other ranks stopped.
        """
        rows = []
        for record in self.store.list():
            current = running.view(self.agents, record)
            if enforce and running.enforce(self.agents, current, self.stop_grace_s):
                current = running.view(self.agents, record)
            rates = running.tokens(self.agents, record) if current.live() else running.WorkloadTokens()
            ended = current.state in ("exited", "stopped", "failed")
            if ended and record.workload_id not in self._baseline_read:
                self._baseline_read.add(record.workload_id)  # the node's history is read once, not per poll
                self.record_baselines(current)
            row = WorkloadRow(current, rates.decode_tps, scaling(current, rates, self.baselines), rates.prefill_tps)
            if current.state in ENDED:
                row.last = self._last_tokens(record)
                row.stale = current.state in CLEARABLE and time.time() - running.ended_at(current) > CLEAR_AFTER_S
            rows.append(row)
        return rows

    def _last_tokens(self, record: WorkloadRecord) -> running.LastTokens | None:
        """Read once per ended workload (its nodes' history does not change once it ended)."""
        if record.workload_id not in self._last_read:
            self._last_read[record.workload_id] = running.last_tokens(self.agents, record)
        return self._last_read[record.workload_id]

    # --- reaching an engine from here -------------------------------------------------------------

    def open_api(self, workload_id: str) -> list[tuple[Endpoint, str]]:
        """Keep a tunnel to each of the workload's HTTP endpoints until ``close_api``: [(endpoint, URL)]."""
        if workload_id in self._opened:
            return self._opened[workload_id][1]
        # TunnelReach touches the fleet's SSH transports (the keyring, the client key) only for an
        # engine on a node: opening one on this computer never waits on them.
        stack = ExitStack()
        try:
            opened = stack.enter_context(open_workload(TunnelReach(self.agents), self.store.list(), workload_id))
        except BaseException:
            stack.close()
            raise
        self._opened[workload_id] = (stack, opened)
        return opened

    def close_api(self, workload_id: str) -> None:
        entry = self._opened.pop(workload_id, None)
        if entry is not None:
            entry[0].close()

    def close_all_api(self) -> None:
        for workload_id in list(self._opened):
            self.close_api(workload_id)

    def opened_api(self, workload_id: str) -> list[tuple[Endpoint, str]] | None:
        entry = self._opened.get(workload_id)
        return entry[1] if entry else None

    def prune(self, states: Sequence[str] = CLEARABLE) -> list[str]:
        """Drop every workload in one of ``states`` (failed and gone by default) from the list and
        its nodes (with its logs); the ids dropped. A node that cannot be asked keeps its copy."""
        dropped = []
        for record in self.store.list():
            current = running.view(self.agents, record)
            if current.state not in states:
                continue
            problems = running.forget(self.agents, record)
            for node, problem in problems.items():
                log.warning("workload %s stays on %s: %s", record.workload_id, node, problem)
            self.store.remove(record.workload_id)
            dropped.append(record.workload_id)
        return dropped

    def record_baselines(self, current: running.WorkloadView) -> list[Baseline]:
        """An ended one-node training run's median tokens/s, stored as its setup's baseline."""
        try:
            return record_baselines(self.agents, current, self.baselines)
        except SparkSyncError as exc:  # the list still shows; the baseline waits for a readable file
            log.warning("no baseline recorded for %s: %s", current.workload_id, exc)
            return []

    def watch(
        self,
        workload_id: str,
        cancel: threading.Event,
        on_view: Callable[[running.WorkloadView], None] | None = None,
        poll_s: float = running.WATCH_POLL_S,
    ) -> running.WorkloadView:
        """Poll one workload until it ends (a failed rank stops the rest); its last view."""
        return running.watch(self.agents, self.store.get(workload_id), cancel, on_view, poll_s, self.stop_grace_s)

    def tokens(self, workload_id: str) -> running.WorkloadTokens:
        return running.tokens(self.agents, self.store.get(workload_id))

    def scaling(self, current: running.WorkloadView, rates: running.WorkloadTokens) -> list[GroupScaling]:
        return scaling(current, rates, self.baselines)

    def ranks(self, workload_id: str, rank: int | None = None, group: str | None = None) -> list[RankRef]:
        return running.select_ranks(self.store.get(workload_id), rank, group)

    def log_page(self, workload_id: str, ref: RankRef, since: int = 0, limit: int | None = None) -> LogPage:
        return running.logs(self.agents, workload_id, ref, since, limit)

    def follow(self, workload_id: str, ref: RankRef, since: int | None = None) -> Iterator[LogItem]:
        """Live lines of one process until it ends."""
        return running.follow(self.agents, workload_id, ref, since)

    # --- engines --------------------------------------------------------------------------------

    def engines(self, nodes: Sequence[str], refresh: bool = False) -> dict[str, EngineReport | SparkSyncError]:
        """Per node (at once): the engines its agent found, or why it could not be asked."""
        answers = running.parallel(list(nodes), lambda n: self.agents.call(n, lambda c: c.engines(refresh)))
        return answers

    def install_engine(
        self,
        node: str,
        on_progress: Callable[[InstallProgress], None],
        flavour: str = "auto",
        jobs: int | None = None,
        cancel: threading.Event | None = None,
    ) -> str:
        """Build llama.cpp on ``node`` (this computer too); where it went. Minutes for a real build."""
        return install_engine(self.agents, node, on_progress, flavour, jobs, cancel)  # type: ignore[arg-type]

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
