"""The cluster's fabric plan, stored with the cluster: ``<config dir>/cluster_fabric.json``.

One versioned file, written atomically (mode 0600), holding the last plan and
whether it is applied. Nodes are keyed by their stable id; the names in it
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
    plan: FabricPlan | None = None
    state: PlanState = PlanState.planned
    changed_at: datetime | None = None

    @property
    def applied(self) -> FabricPlan | None:
        """The plan every node carries now, if any."""
        return self.plan if self.plan is not None and self.state is PlanState.applied else None


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
        return self.save(StoredFabric(plan=plan, state=state))

    def set_state(self, state: PlanState) -> Path:
        stored = self.load()
        return self.save(stored.model_copy(update={"state": state}))

    def applied(self) -> FabricPlan | None:
        return self.load().applied

    def _relabel(self, stored: StoredFabric) -> StoredFabric:
        if stored.plan is None or self._names is None:
            return stored
        known = self._names()
        nodes = {
            node_id: plan.model_copy(update={"name": known.name_of(node_id) or plan.name})
            for node_id, plan in stored.plan.nodes.items()
        }
        return stored.model_copy(update={"plan": stored.plan.model_copy(update={"nodes": nodes})})
