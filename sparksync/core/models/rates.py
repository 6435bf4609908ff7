"""Copy rates measured per node: the estimate a workload launch gives before copying a model.

One small file in the data dir, keyed by the node's stable id (a rename keeps
it), versioned and written atomically under a lock. Each finished copy
updates its target's rate (bytes per second, an exponential mean so one slow
copy does not set the figure alone).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.file_lock import exclusive_lock
from sparksync.core.base.paths import data_dir, ensure_dir

RATES_FILE = "copy-rates.json"
RATES_VERSION = 1
WEIGHT_NEW = 0.5


class NodeRate(BaseModel):
    bytes_per_s: float = Field(gt=0)
    copies: int = Field(1, ge=1)
    measured_at: float


class RatesFile(BaseModel):
    version: int = RATES_VERSION
    nodes: dict[str, NodeRate] = Field(default_factory=dict)  # node id -> its rate as a copy target


class CopyRates:
    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else data_dir() / RATES_FILE

    def get(self, node_id: str) -> float | None:
        rate = self._read().nodes.get(node_id)
        return rate.bytes_per_s if rate is not None else None

    def record(self, node_id: str, nbytes: int, seconds: float) -> None:
        if nbytes <= 0 or seconds <= 0:
            return
        measured = nbytes / seconds
        with self._changing() as data:
            old = data.nodes.get(node_id)
            if old is not None:
                measured = WEIGHT_NEW * measured + (1 - WEIGHT_NEW) * old.bytes_per_s
            data.nodes[node_id] = NodeRate(
                bytes_per_s=measured, copies=(old.copies + 1) if old else 1, measured_at=time.time()
            )

    @contextmanager
    def _changing(self) -> Iterator[RatesFile]:
        ensure_dir(self.path.parent)
        with exclusive_lock(self.path.with_name(self.path.name + ".lock")):
            data = self._read()
            yield data
            write_atomic(self.path, data.model_dump_json(indent=2) + "\n", mode=0o600)

    def _read(self) -> RatesFile:
        try:
            data = RatesFile.model_validate_json(self.path.read_bytes())
        except (FileNotFoundError, ValidationError, OSError):
            return RatesFile()  # rates are estimates: an unreadable file only costs the estimate
        return data if data.version == RATES_VERSION else RatesFile()
