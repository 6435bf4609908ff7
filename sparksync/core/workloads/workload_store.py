"""The client's small record of the workloads it started: ``<data dir>/workloads.json``.

The agents are the source of truth for what runs; this record only says
which workload ids exist and which node runs which process of each, so a new
CLI process (``sparksync workload list/stop/logs``) knows whom to ask. It is
one versioned pydantic file, written atomically under a lock, so two CLI
processes starting workloads at once never lose each other's entries.

Each record keeps the id of every node it names (``node_ids``), so a
renamed node keeps its workloads: reading gives every node its current name.
Version 1 named nodes only; reading it finds each name's node (by its name
now, or a former one), and the next change writes version 2.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.file_lock import exclusive_lock
from sparksync.core.base.paths import data_dir, ensure_dir
from sparksync.core.nodes.identity import NodeNames
from sparksync.core.workloads.errors import WorkloadError
from sparksync.core.workloads.plan import Plan

log = logging.getLogger(__name__)

STORE_VERSION = 2
STORE_FILE = "workloads.json"
ID_MAX = 80  # the agent's NAME_PATTERN allows 80 characters


class UnknownWorkloadError(WorkloadError):
    """No workload with that id was started from this computer."""

    exit_code = 4


class WorkloadStoreError(WorkloadError):
    """The record file cannot be read or written."""

    exit_code = 1


class RankRef(BaseModel):
    """Where one process of a workload runs: enough to ask its agent about it."""

    model_config = ConfigDict(extra="forbid")

    node: str
    name: str = Field(description="The process name on the node: '<group>.<rank>.<role>'.")
    group: str
    rank: int
    role: str
    stage: int = 0


class Endpoint(BaseModel):
    """A group's HTTP API on its head node (inference engines), for clients and tunnels."""

    model_config = ConfigDict(extra="forbid")

    group: str
    node: str
    host: str  # where the head's agent reaches it (loopback for an engine on all interfaces)
    port: int
    listen: str | None = None  # the address the engine binds (recipe http_host): 0.0.0.0 = every interface


class WorkloadRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workload_id: str
    recipes: list[str]
    plan: Plan
    ranks: list[RankRef]
    endpoints: list[Endpoint] = Field(default_factory=list)
    created_at: float = Field(default_factory=time.time)
    node_ids: dict[str, str] = Field(
        default_factory=dict, description="Each node name used above -> that node's stable id."
    )

    def nodes(self) -> list[str]:
        """Every node that runs a process of this workload, in plan order."""
        return list(dict.fromkeys(r.node for r in self.ranks))

    def named_nodes(self) -> list[str]:
        """Every node name the record uses (plan, ranks, endpoints)."""
        names = [n for g in self.plan.groups for n in g.nodes]
        return list(dict.fromkeys([*names, *(r.node for r in self.ranks), *(e.node for e in self.endpoints)]))

    def with_current_names(self, names: NodeNames) -> WorkloadRecord:
        """The record with its node ids filled in and every node under its name now."""
        ids = names.ids_for(self.named_nodes(), self.node_ids)
        new = names.relabel(ids)
        if ids == self.node_ids and all(old == name for old, name in new.items()):
            return self
        return self._renamed(new, {new[old]: node_id for old, node_id in ids.items()})

    def _renamed(self, new: Mapping[str, str], node_ids: dict[str, str]) -> WorkloadRecord:
        def name(old: str) -> str:
            return new.get(old, old)

        plan = self.plan.model_copy(
            update={"groups": [g.model_copy(update={"nodes": [name(n) for n in g.nodes]}) for g in self.plan.groups]}
        )
        return self.model_copy(
            update={
                "plan": plan,
                "ranks": [r.model_copy(update={"node": name(r.node)}) for r in self.ranks],
                "endpoints": [e.model_copy(update={"node": name(e.node)}) for e in self.endpoints],
                "node_ids": node_ids,
            }
        )


class WorkloadFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = STORE_VERSION
    workloads: list[WorkloadRecord] = Field(default_factory=list)


def new_workload_id(label: str) -> str:
    """'<label>-<utc time>-<4 hex>': unique, sortable by time, and a valid name on the nodes."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    suffix = f"-{stamp}-{secrets.token_hex(2)}"
    return label[: ID_MAX - len(suffix)] + suffix


class WorkloadStore:
    """The record file; every change is a read-modify-write under an exclusive lock.

    ``names`` says which node each name stands for now (default: the registry's).
    """

    def __init__(self, path: Path | None = None, names: Callable[[], NodeNames] = NodeNames.current):
        self.path = Path(path) if path is not None else data_dir() / STORE_FILE
        self.names = names

    def list(self) -> list[WorkloadRecord]:
        return self._read().workloads

    def get(self, workload_id: str) -> WorkloadRecord:
        for record in self.list():
            if record.workload_id == workload_id:
                return record
        known = ", ".join(r.workload_id for r in self.list()) or "none"
        raise UnknownWorkloadError(
            f"no workload {workload_id!r} was started from this computer (known: {known}). "
            "See `sparksync workload list`."
        )

    def add(self, record: WorkloadRecord) -> None:
        with self._changing() as data:
            data.workloads = [w for w in data.workloads if w.workload_id != record.workload_id]
            data.workloads.append(record.with_current_names(self.names()))

    def remove(self, workload_id: str) -> None:
        with self._changing() as data:
            data.workloads = [w for w in data.workloads if w.workload_id != workload_id]

    # --- internals ----------------------------------------------------------------------

    @contextmanager
    def _changing(self) -> Iterator[WorkloadFile]:
        ensure_dir(self.path.parent)
        with exclusive_lock(self.path.with_name(self.path.name + ".lock")):
            data = self._read()
            yield data
            data.version = STORE_VERSION
            write_atomic(self.path, data.model_dump_json(indent=2) + "\n", mode=0o600)

    def _read(self) -> WorkloadFile:
        data = self._read_file()
        if data.workloads:
            names = self.names()
            data.workloads = [w.with_current_names(names) for w in data.workloads]
        return data

    def _read_file(self) -> WorkloadFile:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return WorkloadFile()
        except OSError as exc:
            raise WorkloadStoreError(
                f"cannot read {self.path} ({exc.strerror}); fix its permissions."
            ) from None
        try:
            version = json.loads(raw).get("version", STORE_VERSION)
        except (ValueError, AttributeError):
            version = STORE_VERSION
        if isinstance(version, int) and version > STORE_VERSION:
            raise WorkloadStoreError(
                f"{self.path} was written by a newer SparkSync (format {version}; this one reads "
                f"{STORE_VERSION}). Upgrade SparkSync; the file is left untouched."
            )
        try:
            return WorkloadFile.model_validate_json(raw)
        except ValidationError as exc:
            raise WorkloadStoreError(
                f"{self.path} is not a valid workload record ({exc.errors()[0]['msg']}). Move it aside; "
                "the workloads keep running and `sparksync workload list` then starts a new record."
            ) from None
