"""The cluster's fabric plan, stored with the cluster: ``<config dir>/cluster_fabric.json``.

One versioned file, written atomically (mode 0600), holding the latest plan
and the plan the nodes carry (``applied``), which a newer plan replaces only
once it is applied. Nodes are keyed by their stable id; the names in it
are labels, refreshed from the registry on reading, so a rename keeps the
plan. Workloads read the applied plan's per-node environment from here.

A file that cannot be read is an error naming it, never silently dropped: a
workload launched without the fabric's environment would run over the
management network, slowly. A file from a newer SparkSync is refused, not
overwritten.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.paths import config_dir, ensure_dir
from sparksync.core.fabric.errors import FabricStoreError
from sparksync.core.fabric.plan import FabricPlan
from sparksync.core.nodes.identity import NodeNames

STORE_VERSION = 1
STORE_FILE = "cluster_fabric.json"


class PlanState(str, Enum):
    planned = "planned"  # shown, not applied
    applied = "applied"  # every node carries it
    rolled_back = "rolled_back"  # every node was put back as it was before


class StoredFabric(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(STORE_VERSION, ge=1)
    plan: FabricPlan | None = Field(None, description="The latest plan (shown by 'cluster plan').")
    state: PlanState = Field(PlanState.planned, description="Of the latest plan.")
    applied: FabricPlan | None = Field(
        None, description="The plan every node carries now; a newer plan only replaces it once applied."
    )
    changed_at: datetime | None = None


def fabric_store_path() -> Path:
    return config_dir() / STORE_FILE


class FabricStore:
    """``names``: where the current names come from (the registry by default; None keeps the labels)."""

    def __init__(self, path: Path | None = None, names: Callable[[], NodeNames] | None = NodeNames.current):
        self.path = path or fabric_store_path()
        self._names = names

    def load(self) -> StoredFabric:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return StoredFabric()
        except OSError as exc:
            raise FabricStoreError(f"cannot read the cluster's fabric plan {self.path} ({exc.strerror})") from None
        try:
            version = int(json.loads(raw).get("version", 0))
        except (ValueError, AttributeError):
            version = 0
        if version > STORE_VERSION:
            raise FabricStoreError(
                f"the cluster's fabric plan {self.path} is format {version}, newer than this SparkSync reads "
                f"({STORE_VERSION}); upgrade SparkSync."
            )
        try:
            stored = StoredFabric.model_validate_json(raw)
        except ValidationError as exc:
            raise FabricStoreError(
                f"the cluster's fabric plan {self.path} is not readable ({exc.error_count()} problems, first: "
                f"{exc.errors()[0]['msg']}); fix or remove the file and plan again."
            ) from None
        return self._relabel(stored)

    def save(self, stored: StoredFabric) -> Path:
        stored = stored.model_copy(update={"version": STORE_VERSION, "changed_at": datetime.now(timezone.utc)})
        ensure_dir(self.path.parent)
        write_atomic(self.path, stored.model_dump_json(indent=2) + "\n", mode=0o600)
        return self.path

    def save_plan(self, plan: FabricPlan, state: PlanState = PlanState.planned) -> Path:
        """Store a new latest plan; the applied one stays until this one is applied."""
        stored = self.load().model_copy(update={"plan": plan})
        return self.save(_with_state(stored, state))

    def set_state(self, state: PlanState) -> Path:
        """The latest plan was applied on every node, or every node was rolled back."""
        return self.save(_with_state(self.load(), state))

    def applied(self) -> FabricPlan | None:
        return self.load().applied

    def _relabel(self, stored: StoredFabric) -> StoredFabric:
        if self._names is None or (stored.plan is None and stored.applied is None):
            return stored
        known = self._names()

        def relabel(plan: FabricPlan | None) -> FabricPlan | None:
            if plan is None:
                return None
            nodes = {
                node_id: node.model_copy(update={"name": known.name_of(node_id) or node.name})
                for node_id, node in plan.nodes.items()
            }
            return plan.model_copy(update={"nodes": nodes})

        return stored.model_copy(update={"plan": relabel(stored.plan), "applied": relabel(stored.applied)})


def _with_state(stored: StoredFabric, state: PlanState) -> StoredFabric:
    if state is PlanState.applied:
        return stored.model_copy(update={"state": state, "applied": stored.plan})
    if state is PlanState.rolled_back:
        return stored.model_copy(update={"state": state, "applied": None})
    return stored.model_copy(update={"state": state})
