"""The last known state of each paired node, kept between runs.

``node_states.json`` in the data dir, versioned and written atomically under
a lock, so `sparksync node list` can show each node's state, reason and
last-seen time without reaching the nodes, and the GUI and the CLI see what
the other learned. Each record carries the pinned host key's fingerprint and
the time the node was paired: once the node is paired again (unpaired and
paired, or re-paired with a new key) the old record no longer applies and
the node reads as ``paired`` until it is checked again.

Records are keyed by the node's id (``PairedNode.node_id``), so a rename
keeps them; each also carries the name it had, for people reading the file.
Version 1 keyed them by name: reading it files each record under the id of
the host key it was recorded with, which is the id the registry gave every
node it migrated.

A missing, corrupt or newer-version file never stops a command: this file
holds only what the next check finds out again. A corrupt one is moved aside
(``.bad``) on the next write rather than silently lost; one from a newer
SparkSync is read as empty and never overwritten.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.file_lock import exclusive_lock
from sparksync.core.fleet.state import Cause, NodeState, NodeStatus, StateTracker, utc_now
from sparksync.core.base.paths import data_dir, ensure_dir
from sparksync.core.nodes.identity import node_id_from_fingerprint
from sparksync.core.nodes.registry import PairedNode

log = logging.getLogger(__name__)

STORE_VERSION = 2
STORE_FILE = "node_states.json"


class StoredState(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str | None = None  # the node's name when this was recorded: a label only
    host_key: str  # fingerprint pinned when this was recorded
    paired_at: datetime  # the registry entry's added_at: a node paired again starts afresh
    state: NodeState
    cause: Cause | None = None
    reason: str | None = None
    since: datetime
    last_seen: datetime | None = None
    checked_at: datetime


class StateFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: int = Field(ge=1)
    nodes: dict[str, StoredState] = Field(default_factory=dict)  # node id -> its state (v1: name ->)

    def by_id(self) -> dict[str, StoredState]:
        if self.version >= 2:
            return dict(self.nodes)
        migrated: dict[str, StoredState] = {}
        for name, record in self.nodes.items():
            try:
                node_id = node_id_from_fingerprint(record.host_key)
            except ValueError:
                log.warning("node state of %s has no usable host key; it is dropped", name)
                continue
            migrated[node_id] = record.model_copy(update={"name": name})
        return migrated


class NodeStateStore:
    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else data_dir() / STORE_FILE
        self.lock_path = self.path.with_name(self.path.name + ".lock")

    def status(self, node: PairedNode) -> tuple[NodeStatus, datetime | None]:
        """The node's last known status and when it was checked (``paired`` and None if never)."""
        return self._status_from(self._read().get(node.node_id), node)

    def statuses(self, nodes: Iterable[PairedNode]) -> dict[str, tuple[NodeStatus, datetime | None]]:
        """Each node's status, by its (current) name."""
        records = self._read()
        return {node.name: self._status_from(records.get(node.node_id), node) for node in nodes}

    def record(self, node: PairedNode, status: NodeStatus) -> None:
        """Save ``status`` as the node's latest (other nodes' records are kept)."""
        self.record_many([(node, status)])

    def record_many(self, items: Iterable[tuple[PairedNode, NodeStatus]]) -> None:
        items = list(items)
        if not items:
            return
        ensure_dir(self.path.parent)
        with exclusive_lock(self.lock_path):
            if self._newer():
                return  # never overwrite what a newer SparkSync wrote
            records = self._read(move_bad_aside=True)
            now = utc_now()
            for node, status in items:
                records[node.node_id] = StoredState(
                    name=node.name,
                    host_key=node.host_key.fingerprint,
                    paired_at=node.added_at,
                    state=status.state,
                    cause=status.cause,
                    reason=status.reason,
                    since=status.since,
                    last_seen=status.last_seen,
                    checked_at=now,
                )
            self._write(records)

    def mark(self, node: PairedNode, state: NodeState, reason: str | None = None) -> NodeStatus:
        """Move the node to ``state`` from its last known one (e.g. ``deploying`` when a deploy starts).

        IllegalTransitionError if the table does not allow the move.
        """
        ensure_dir(self.path.parent)
        with exclusive_lock(self.lock_path):
            old, _ = self._status_from(self._read().get(node.node_id), node)
            if old.state in (NodeState.DISCOVERED, NodeState.PAIRING):
                old = old.model_copy(update={"state": NodeState.PAIRED})  # it is in the registry
            _, new = StateTracker(old).move(state, None, reason)
        self.record(node, new)
        return new

    def forget(self, node: PairedNode) -> None:
        """Drop a node's record (after unpairing it)."""
        if not self.path.exists():
            return
        with exclusive_lock(self.lock_path):
            if self._newer():
                return
            records = self._read(move_bad_aside=True)
            if records.pop(node.node_id, None) is not None:
                self._write(records)

    # --- internals --------------------------------------------------------------------------

    @staticmethod
    def _status_from(record: StoredState | None, node: PairedNode) -> tuple[NodeStatus, datetime | None]:
        if record is None or (record.host_key, record.paired_at) != (
            node.host_key.fingerprint,
            node.added_at,
        ):
            return NodeStatus(name=node.name, state=NodeState.PAIRED, since=node.added_at), None
        status = NodeStatus(
            name=node.name,
            state=record.state,
            cause=record.cause,
            reason=record.reason,
            since=record.since,
            last_seen=record.last_seen,
        )
        return status, record.checked_at

    def _newer(self) -> bool:
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return False
        version = data.get("version") if isinstance(data, dict) else None
        return isinstance(version, int) and version > STORE_VERSION

    def _read(self, move_bad_aside: bool = False) -> dict[str, StoredState]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            log.warning("cannot read %s (%s); node states start afresh", self.path, exc)
            return {}
        try:
            data = json.loads(raw)
            if self._newer():
                log.warning("%s comes from a newer SparkSync; it is left as it is", self.path)
                return {}
            return StateFile.model_validate(data).by_id()
        except (ValueError, ValidationError) as exc:
            log.warning("%s is unreadable (%s); node states start afresh", self.path, exc)
            if move_bad_aside:
                self.path.replace(self.path.with_name(self.path.name + ".bad"))
            return {}

    def _write(self, records: dict[str, StoredState]) -> None:
        document = StateFile(version=STORE_VERSION, nodes=records).model_dump(mode="json")
        write_atomic(self.path, json.dumps(document, indent=2) + "\n", mode=0o600)
