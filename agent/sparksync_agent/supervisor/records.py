"""Workload state that survives an agent restart: one versioned file, written atomically."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from pydantic import BaseModel, Field

from sparksync_agent.atomic import write_atomic
from sparksync_agent.protocol import RankLaunch, RankState

log = logging.getLogger(__name__)

WORKLOADS_FILE = "workloads.json"
FILE_VERSION = 1


class RankRecord(BaseModel):
    """Everything the agent knows about one rank, as it persists it."""

    workload_id: str
    launch: RankLaunch
    state: RankState
    attempt: int = 1
    keeper_pid: int | None = None
    keeper_ticks: int | None = Field(
        None, description="The keeper's start time (/proc stat): defeats pid reuse."
    )
    started_at: float | None = None
    ready_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    message: str | None = None
    last_lines: list[str] = Field(default_factory=list)
    failures: list[float] = Field(default_factory=list, description="Unix times of recent failures.")
    stop_requested: bool = False


class WorkloadsFile(BaseModel):
    version: int = FILE_VERSION
    ranks: list[RankRecord] = Field(default_factory=list)


class Store:
    def __init__(self, path: Path):
        self.path = path

    def load(self) -> list[RankRecord]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            loaded = WorkloadsFile.model_validate_json(data)
        except ValueError as exc:
            # Keep the unreadable file for a person to look at; start with no workloads.
            aside = self.path.with_name(f"{self.path.name}.unreadable-{int(time.time())}")
            self.path.rename(aside)
            log.error("workload state %s is unreadable (%s); moved it to %s", self.path, exc, aside)
            return []
        if loaded.version > FILE_VERSION:
            log.warning(
                "workload state %s is version %d, newer than this agent's %d",
                self.path,
                loaded.version,
                FILE_VERSION,
            )
        return loaded.ranks

    def save(self, records: list[RankRecord]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomic(self.path, WorkloadsFile(ranks=records).model_dump_json(indent=1), mode=0o600)
