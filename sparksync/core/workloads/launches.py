"""From a plan to the launches each node's agent runs: the whole client-side pipeline.

    groups = plan_launches(plan, recipes, fabric)       # PlanError, FabricError, RecipeError...
    fits = require_fit(plan, recipes, memory)           # MemoryFitError, with the numbers
    for group in groups: for rank in group.ranks: send rank to rank.node's agent, by stage

Everything that can be refused is refused here, before any process starts.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from sparksync.core.workloads.commands import build_ranks
from sparksync.core.workloads.commands.context import GroupContext
from sparksync.core.workloads.fabric import (
    Backend,
    Fabric,
    backend_for,
    check_backend,
    fabric_env,
    fabric_warnings,
    node_ips,
)
from sparksync.core.workloads.launch_spec import RankLaunch
from sparksync.core.workloads.plan import Plan, validate_plan
from sparksync.core.workloads.recipe import Recipe

# Variables whose values a printed command hides: tokens and keys end up in terminals and bug reports.
_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
HIDDEN = "<hidden>"


class GroupLaunch(BaseModel):
    """One group (replica) ready to start: its launches in stage order."""

    group: str
    recipe: str
    nodes: list[str]
    backend: Backend
    ranks: list[RankLaunch]
    warnings: list[str] = []

    @property
    def stages(self) -> list[list[RankLaunch]]:
        """Launches grouped by stage: start one stage, wait until all are ready, then the next."""
        numbers = sorted({r.stage for r in self.ranks})
        return [[r for r in self.ranks if r.stage == n] for n in numbers]


def group_context(group: str, recipe: Recipe, nodes: Sequence[str], fabric: Fabric) -> GroupContext:
    """Addresses and fabric environment for one group; multi-node groups need the fabric."""
    backend = backend_for(fabric, recipe.collectives)
    ips = node_ips(fabric, nodes)
    envs = {} if len(nodes) == 1 else {n: fabric_env(fabric, n, backend) for n in nodes}
    if len(nodes) > 1:
        check_backend(fabric, nodes, backend)
    return GroupContext(group=group, recipe=recipe, nodes=tuple(nodes), ips=ips, fabric_env=envs)


def build_group(group: str, recipe: Recipe, nodes: Sequence[str], fabric: Fabric) -> GroupLaunch:
    backend = backend_for(fabric, recipe.collectives)
    ranks = build_ranks(group_context(group, recipe, nodes, fabric))
    warnings = fabric_warnings(fabric, len(nodes), backend) if len(nodes) > 1 else []
    return GroupLaunch(
        group=group, recipe=recipe.name, nodes=list(nodes), backend=backend, ranks=ranks, warnings=warnings
    )


def plan_launches(
    plan: Plan, recipes: Mapping[str, Recipe], fabric: Fabric, cluster: Sequence[str] | None = None
) -> list[GroupLaunch]:
    """Validate the plan, then build every group's launches; nothing is started."""
    validate_plan(plan, recipes, cluster)
    return [
        build_group(gid, recipes[g.recipe], g.nodes, fabric) for gid, g in zip(plan.group_ids(), plan.groups)
    ]


def shell_command(launch: RankLaunch, reveal: bool = False) -> str:
    """One launch as a shell line (``cd DIR && env K=V ... argv``), for previews and hand-made scripts.

    Values of variables named like secrets are shown as ``<hidden>`` unless ``reveal``.
    """
    env = [f"{k}={v if reveal or not _SECRET_NAME.search(k) else HIDDEN}" for k, v in launch.env.items()]
    line = shlex.join(["env", *env, *launch.argv] if env else launch.argv)
    return f"cd {shlex.quote(launch.cwd)} && {line}" if launch.cwd else line
