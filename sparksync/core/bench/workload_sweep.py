"""A scale sweep on real nodes: each size is a workload started through the agents, measured, then stopped.

``WorkloadBringUp`` is the ``bring_up`` a :class:`~sparksync.core.bench.scale.ScaleSweep`
takes. For ``n`` nodes it starts the recipe on the first ``n`` of the given
nodes with the orchestrator (a one-replica llama.cpp recipe is split over
all of them: llama-server on the head, rpc-server on the others), reaches
the head's HTTP API (an SSH tunnel, or the node's address), yields the
target with where it ran, and stops and forgets the workload when the
measurement ends, so the next size starts on free nodes and ports.

A size that cannot start (a node down, not enough memory) is skipped with
the reason; a recipe or option that is wrong at every size is refused
before anything starts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparksync.core.bench.context import RunContext
from sparksync.core.bench.endpoint import Endpoint
from sparksync.core.bench.errors import BenchError, BenchInputError
from sparksync.core.bench.scale import SweepTarget
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.workloads import running
from sparksync.core.workloads.errors import WorkloadError
from sparksync.core.workloads.launch_request import resolve
from sparksync.core.workloads.orchestrator import Orchestrator, WorkloadCancelled
from sparksync.core.workloads.plan import Plan
from sparksync.core.workloads.reach import Reach
from sparksync.core.workloads.recipe import Engine, Recipe
from sparksync.core.workloads.workload_store import Endpoint as WorkloadEndpoint
from sparksync.core.workloads.workload_store import WorkloadRecord

log = logging.getLogger(__name__)

STOP_GRACE_S = 10.0


class SizeNotStartedError(BenchError):
    """The workload for one size of the sweep could not start; the sweep goes on with the next."""

    exit_code = 39


@dataclass(frozen=True)
class SweepWorkload:
    """What to start at every size, and what the history records about it."""

    recipe: str
    nodes: Sequence[str]  # in rank order; size n uses the first n
    model: str  # the served name the benchmark asks for
    tokenizer: Path  # a local tokenizer.json (or folder) matching the model on the nodes
    overrides: Mapping[str, Any] = field(default_factory=dict)
    topology: str | None = None  # of the sizes above 1 (1 node is "single")
    backend: str | None = None  # default: "rpc" for llama.cpp over several nodes
    model_file: Path | None = None  # a local copy of the model, for the bounds


class WorkloadBringUp:
    """``bring_up(n)`` for a ScaleSweep: the workload on n nodes while the block runs."""

    def __init__(self, orchestrator: Orchestrator, reach: Reach, workload: SweepWorkload):
        self.orchestrator, self.reach, self.workload = orchestrator, reach, workload
        self.started: list[str] = []  # workload ids, in order (for reports and tests)

    def check(self, sizes: Sequence[int]) -> None:
        """Resolve the recipe at every size now: a mistake is refused before any size starts."""
        for size in sizes:
            self.resolve(size)

    def resolve(self, size: int) -> tuple[Plan, dict[str, Recipe]]:
        nodes = list(self.workload.nodes)
        if size > len(nodes):
            raise BenchInputError(
                f"{size} nodes asked for, but only {len(nodes)} were given: {', '.join(nodes)}"
            )
        try:
            plan, recipes = resolve(self.workload.recipe, nodes[:size], None, self.workload.overrides)
        except WorkloadError as exc:
            raise BenchInputError(f"recipe {self.workload.recipe} on {size} node(s): {exc}") from None
        if len(plan.groups) != 1 or len(plan.nodes()) != size:
            raise BenchInputError(f"recipe {self.workload.recipe} does not run as one replica on {size} "
                                  "node(s); a scale sweep needs a recipe that splits over the nodes")  # fmt: skip
        return plan, recipes

    @contextmanager
    def __call__(self, size: int) -> Iterator[SweepTarget]:
        plan, recipes = self.resolve(size)
        record = self._start(size, plan, recipes)
        with ExitStack() as stack:
            stack.callback(self._stop, record)
            endpoint = self._endpoint(record)
            try:
                base_url = stack.enter_context(self.reach(endpoint))
            except SparkSyncError as exc:
                raise SizeNotStartedError(
                    f"cannot reach {endpoint.group} on {endpoint.node}: {exc}"
                ) from None
            context = self._context(size, plan, recipes[plan.groups[0].recipe])
            yield SweepTarget(Endpoint.parse(base_url), self.workload.model, self.workload.tokenizer, context,
                              self.workload.model_file)  # fmt: skip

    def _start(self, size: int, plan: Plan, recipes: dict[str, Recipe]) -> WorkloadRecord:
        try:
            prepared = self.orchestrator.prepare(plan, recipes, label=f"bench-scale-{size}")
            view = self.orchestrator.start(prepared)
        except WorkloadCancelled:
            raise  # Ctrl-C ends the sweep, not just this size
        except SparkSyncError as exc:
            raise SizeNotStartedError(f"the workload on {size} node(s) did not start: {exc}") from None
        self.started.append(view.workload_id)
        return view.record

    def _endpoint(self, record: WorkloadRecord) -> WorkloadEndpoint:
        if not record.endpoints:
            raise SizeNotStartedError(f"workload {record.workload_id} serves no HTTP API to benchmark")
        return record.endpoints[0]

    def _context(self, size: int, plan: Plan, recipe: Recipe) -> RunContext:
        several = size > 1
        backend = self.workload.backend or ("rpc" if several and recipe.engine is Engine.llamacpp else None)
        return RunContext(cluster_size=size, topology=self.workload.topology if several else "single",
                          collective_backend=backend if several else None, recipe=recipe.name,
                          engine=recipe.engine.value, nodes=tuple(plan.nodes()))  # fmt: skip

    def _stop(self, record: WorkloadRecord) -> None:
        agents = self.orchestrator.agents
        failed = running.stop(agents, record, STOP_GRACE_S)
        if failed:
            # Left in the store so `sparksync workload stop` can finish the job.
            log.warning("bench scale: workload %s not stopped on %s", record.workload_id, ", ".join(failed))
            return
        running.forget(agents, record)
        self.orchestrator.store.remove(record.workload_id)
