"""What a deploy is asked to do, what it reports while it runs, and what it ends with."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


class Stage(str, enum.Enum):
    CHECKING = "checking"
    UPLOADING = "uploading"
    INSTALLING = "installing"
    STARTING = "starting"
    HEALTH = "health"
    ROLLING_BACK = "rolling-back"
    DONE = "done"


class Outcome(str, enum.Enum):
    DEPLOYED = "deployed"  # the bundle's version now runs
    UNCHANGED = "unchanged"  # it already ran and answered; nothing was touched
    ROLLED_BACK = "rolled-back"  # the new version failed; the previous one runs again
    FAILED = "failed"  # nothing changed on the node (or the failed install was removed)
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class ProgressEvent:
    node: str
    stage: Stage
    fraction: float  # 0..1 within the stage
    message: str = ""


ProgressCallback = Callable[[ProgressEvent], None]


@dataclass(frozen=True)
class DeployOptions:
    bundle: Path | None = None  # a bundle to deploy instead of the cached one for the node's target
    mode: str | None = None  # force "systemd-user" or "supervised"; None picks systemd where it works
    advertise: bool = True  # the agent publishes _sparksync._tcp for discovery
    sample_hz: float = 1.0
    health_timeout_s: float = 60.0
    install_timeout_s: float = 600.0  # venv plus pip, on a slow node
    connect_timeout_s: float = 30.0


@dataclass(frozen=True)
class DeployResult:
    node: str
    outcome: Outcome
    version: str | None  # the version that runs on the node afterwards, when known
    service_mode: str | None
    seconds: float
    reason: str | None = None
    previous_version: str | None = None  # what ran before
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.DEPLOYED, Outcome.UNCHANGED)

    def as_json(self) -> dict:
        return {
            "node": self.node,
            "outcome": self.outcome.value,
            "ok": self.ok,
            "version": self.version,
            "service_mode": self.service_mode,
            "seconds": round(self.seconds, 2),
            "reason": self.reason,
            "previous_version": self.previous_version,
            "notes": list(self.notes),
        }
