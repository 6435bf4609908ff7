"""What the app launched, by workload id, and which launch was the last: ``<data dir>/launches.json``.

The tray's "Start/stop last workload" and the panel's Restart need the
choice behind a workload (recipe, nodes, model), which the workload record
(``workload_store``) does not keep. One versioned pydantic file, written
atomically; the oldest entries go beyond ``KEEP``. A file from a newer
SparkSync is left untouched and read as empty.

Each launch keeps the id of every node it chose (``node_ids``), so a restart
after a rename launches on the same nodes, under their names now. Version 1
kept names only; reading it finds each name's node, and the next launch
writes version 2.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.paths import data_dir, ensure_dir
from sparksync.core.nodes.identity import NodeNames
from sparksync.core.workloads.launch_choice import LaunchChoice

log = logging.getLogger(__name__)

LAUNCHES_VERSION = 2
LAUNCHES_FILE = "launches.json"
KEEP = 50


class Launched(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workload_id: str
    choice: LaunchChoice
    node_ids: dict[str, str] = Field(default_factory=dict, description="Each chosen node's name -> its id.")

    def with_current_names(self, names: NodeNames) -> Launched:
        ids = names.ids_for(self.choice.nodes, self.node_ids)
        new = names.relabel(ids)
        nodes = [new.get(n, n) for n in self.choice.nodes]
        return self.model_copy(
            update={
                "choice": self.choice.model_copy(update={"nodes": nodes}),
                "node_ids": {new[old]: node_id for old, node_id in ids.items()},
            }
        )


class LaunchesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = LAUNCHES_VERSION
    last: str | None = None
    launches: list[Launched] = Field(default_factory=list)


class Launches:
    """The file, read and written whole; one app writes it, so a process-local lock is enough."""

    def __init__(self, path: Path | None = None, names: Callable[[], NodeNames] = NodeNames.current):
        self.path = Path(path) if path is not None else data_dir() / LAUNCHES_FILE
        self.names = names
        self._lock = threading.Lock()
        self._writable = True

    def last(self) -> Launched | None:
        data = self._read()
        return next((item for item in data.launches if item.workload_id == data.last), None)

    def choice(self, workload_id: str) -> LaunchChoice | None:
        return next((i.choice for i in self._read().launches if i.workload_id == workload_id), None)

    def add(self, workload_id: str, choice: LaunchChoice) -> None:
        with self._lock:
            data = self._read()
            kept = [i for i in data.launches if i.workload_id != workload_id][-(KEEP - 1) :]
            launched = Launched(workload_id=workload_id, choice=choice).with_current_names(self.names())
            data.launches = [*kept, launched]
            data.last = workload_id
            self._write(data)

    def _write(self, data: LaunchesFile) -> None:
        if not self._writable:
            log.warning("%s was written by a newer SparkSync; not overwriting it", self.path)
            return
        ensure_dir(self.path.parent)
        data.version = LAUNCHES_VERSION
        write_atomic(self.path, data.model_dump_json(indent=2) + "\n", mode=0o600)

    def _read(self) -> LaunchesFile:
        data = self._read_file()
        if data.launches:
            names = self.names()
            data.launches = [item.with_current_names(names) for item in data.launches]
        return data

    def _read_file(self) -> LaunchesFile:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return LaunchesFile()
        except OSError as exc:
            log.warning("cannot read %s: %s", self.path, exc.strerror)
            return LaunchesFile()
        try:
            version = json.loads(raw).get("version", LAUNCHES_VERSION)
        except (ValueError, AttributeError):
            version = LAUNCHES_VERSION
        if isinstance(version, int) and version > LAUNCHES_VERSION:
            self._writable = False  # a newer app's file: keep it as it is
            return LaunchesFile()
        try:
            return LaunchesFile.model_validate_json(raw)
        except ValidationError:
            # Only a convenience for restart and the tray: start afresh rather than refuse to launch.
            log.warning("%s is not a valid launch list; starting a new one", self.path)
            return LaunchesFile()
