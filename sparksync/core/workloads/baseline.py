"""One-node training baselines: ``<data dir>/training_baselines.json``.

Scaling efficiency compares a training run on N nodes with the same
training on one node (bench/report.py holds the formula):

    speed-up   = tokens/s(N) / tokens/s(1)
    efficiency = tokens/s(N) / (N x tokens/s(1))

"The same training" is a *setup*: the recipe's name and the head rank's
torchrun command without the options that only place it (``--standalone``,
``--nnodes``, ``--node_rank``, ``--master_addr/--master_port``, the
``--rdzv-*`` options) and without the launcher's path. What remains is
``--nproc_per_node``, the launcher options of the recipe, the script (or
module) and its arguments, which is where the per-rank batch size lives.
The setup's key, shown to users and typed by them, is
``<recipe>@<first 8 hex digits of the setup's sha256>``, e.g.
``torchrun@3fa2c19b``; ``sparksync workload baseline show`` lists each key
with its setup.

A baseline is recorded by itself when a one-node training workload ends or
is stopped (the median of the tokens/s its node's telemetry still holds), or
set by the user (``sparksync workload baseline set KEY TOK/S``). The newest
wins either way. A measured baseline also keeps what it ran on: its node's
stable id (the name beside it is a label) and the software its node's agent
reported (the SparkSync agent's version, torch's when the engine check found
it), so a run on other nodes or other software is flagged against it
(training_scaling.py); a user's figure has none of that and is never flagged
for it. Format 2 added those fields; a format-1 file reads as it is and the
next write is format 2. One versioned pydantic file, written atomically under a
lock; a file from a newer SparkSync is never overwritten.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shlex
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sparksync_agent.atomic import write_atomic
from sparksync_agent.protocol import Snapshot

from sparksync.core.base.file_lock import exclusive_lock
from sparksync.core.base.paths import data_dir, ensure_dir
from sparksync.core.workloads.errors import WorkloadError

log = logging.getLogger(__name__)

BASELINES_VERSION = 2  # 2: node_id, node, agent_version, torch_version
BASELINES_FILE = "training_baselines.json"
TRAINING_ROLE = "torchrun"  # the role of every torchrun rank (commands/torchrun.py)
TORCH_CHECK = "python:torch"  # the agent's engine check that finds torch (engines/detect.py)

# torchrun options that say where a run is placed, not what it trains; each takes a value
# except --standalone. Both spellings (- and _) and the --opt=value form are accepted by torchrun.
_PLACEMENT_VALUED = {"--nnodes", "--node_rank", "--node-rank", "--master_addr", "--master-addr",
                     "--master_port", "--master-port", "--rdzv-backend", "--rdzv_backend",
                     "--rdzv-endpoint", "--rdzv_endpoint", "--rdzv-id", "--rdzv_id",
                     "--local-addr", "--local_addr"}  # fmt: skip
_PLACEMENT_FLAGS = {"--standalone"}


class BaselineError(WorkloadError):
    """The baseline file cannot be read or written, or a baseline given is not usable."""

    exit_code = 1


class Baseline(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    tokens_per_s: float = Field(gt=0)
    source: Literal["measured", "user"]
    setup: str | None = Field(None, description="The training setup the key stands for, for people.")
    workload_id: str | None = Field(None, description="The one-node workload it was measured on.")
    samples: int | None = Field(None, description="How many telemetry figures the median was taken of.")
    recorded_at: float = Field(default_factory=time.time)
    node_id: str | None = Field(None, description="The stable id of the node it was measured on.")
    node: str | None = Field(None, description="That node's name then: a label, never compared.")
    agent_version: str | None = Field(None, description="The SparkSync agent its node ran.")
    torch_version: str | None = Field(None, description="The torch its node had, when the agent found it.")


@dataclass(frozen=True)
class NodeSoftware:
    """What a node's agent says it runs: the part of a training setup a baseline is stale against."""

    agent_version: str | None = None
    torch_version: str | None = None

    @classmethod
    def of(cls, snapshot: Snapshot) -> NodeSoftware:
        checks = snapshot.engines.checks if snapshot.engines is not None else []
        torch = next((c.version for c in checks if c.name == TORCH_CHECK and c.available), None)
        return cls(agent_version=snapshot.info.agent_version or None, torch_version=torch)


class BaselinesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = BASELINES_VERSION
    baselines: list[Baseline] = Field(default_factory=list)


def setup_of(recipe: str, argv: Sequence[str]) -> str:
    """The training setup of a torchrun rank: its recipe and command, less the placement and launcher."""
    kept: list[str] = []
    skip = False
    for arg in list(argv)[1:]:
        if skip:
            skip = False
            continue
        option = arg.split("=", 1)[0]
        if option in _PLACEMENT_FLAGS or (option in _PLACEMENT_VALUED and "=" in arg):
            continue
        if option in _PLACEMENT_VALUED:
            skip = True
            continue
        kept.append(arg)
    return f"{recipe}: {shlex.join(kept)}"


def key_of(recipe: str, argv: Sequence[str]) -> str:
    digest = hashlib.sha256(setup_of(recipe, argv).encode()).hexdigest()[:8]
    return f"{recipe}@{digest}"


class BaselineStore:
    """The file, read and changed whole under an exclusive lock (the GUI and CLI may both write it)."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else data_dir() / BASELINES_FILE

    def list(self) -> list[Baseline]:
        return self._read().baselines

    def get(self, key: str) -> Baseline | None:
        return next((b for b in self.list() if b.key == key), None)

    def put(self, baseline: Baseline) -> None:
        with self._changing() as data:
            data.baselines = [b for b in data.baselines if b.key != baseline.key] + [baseline]

    def set(self, key: str, tokens_per_s: float) -> Baseline:
        """A user's own figure for ``key`` (e.g. a published one, or one measured elsewhere)."""
        if not key.strip() or "@" not in key:
            raise BaselineError(
                f"{key!r} is not a baseline key; keys look like 'torchrun@3fa2c19b' and "
                "`sparksync workload list` shows the key of each training workload."
            )
        if not tokens_per_s > 0:
            raise BaselineError(f"a baseline is a positive tokens/s, not {tokens_per_s}.")
        old = self.get(key)
        baseline = Baseline(
            key=key, tokens_per_s=tokens_per_s, source="user", setup=old.setup if old else None
        )
        self.put(baseline)
        return baseline

    # --- internals ----------------------------------------------------------------------

    @contextmanager
    def _changing(self) -> Iterator[BaselinesFile]:
        ensure_dir(self.path.parent)
        with exclusive_lock(self.path.with_name(self.path.name + ".lock")):
            data = self._read()
            yield data
            data.version = BASELINES_VERSION  # an older file is written back in this format
            write_atomic(self.path, data.model_dump_json(indent=2) + "\n", mode=0o600)

    def _read(self) -> BaselinesFile:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return BaselinesFile()
        except OSError as exc:
            raise BaselineError(f"cannot read {self.path} ({exc.strerror}); fix its permissions.") from None
        try:
            version = json.loads(raw).get("version", BASELINES_VERSION)
        except (ValueError, AttributeError):
            version = BASELINES_VERSION
        if isinstance(version, int) and version > BASELINES_VERSION:
            raise BaselineError(
                f"{self.path} was written by a newer SparkSync (format {version}; this one reads "
                f"{BASELINES_VERSION}). Upgrade SparkSync; the file is left untouched."
            )
        try:
            return BaselinesFile.model_validate_json(raw)
        except ValidationError as exc:
            raise BaselineError(
                f"{self.path} is not a valid baseline file ({exc.errors()[0]['msg']}). Move it aside "
                "and run each training on one node again, or set the baselines by hand."
            ) from None
