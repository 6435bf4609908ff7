"""The cluster's fabric settings file: ``<config dir>/fabric.json`` (a ``FabricSettings``).

Absent means the defaults (switch topology, NCCL). A file that cannot be
read is an error naming it, never silently replaced by the defaults: a wrong
collective backend would launch a workload that then runs slowly or hangs.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.paths import config_dir, ensure_dir
from sparksync.core.workloads.errors import FabricError, describe_validation
from sparksync.core.workloads.fabric import FABRIC_VERSION, FabricSettings

FABRIC_FILE = "fabric.json"


def fabric_settings_path() -> Path:
    return config_dir() / FABRIC_FILE


def load_fabric_settings(path: Path | None = None) -> FabricSettings:
    path = path or fabric_settings_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return FabricSettings()
    except OSError as exc:
        raise FabricError(f"cannot read the fabric settings {path} ({exc.strerror}).") from None
    try:
        settings = FabricSettings.model_validate_json(raw)
    except ValidationError as exc:
        raise FabricError(
            describe_validation(exc, f"the fabric settings {path}") + " Fix the file."
        ) from None
    if settings.version > FABRIC_VERSION:
        raise FabricError(
            f"the fabric settings {path} are format {settings.version}, newer than this SparkSync reads "
            f"({FABRIC_VERSION}); upgrade SparkSync."
        )
    return settings


def save_fabric_settings(settings: FabricSettings, path: Path | None = None) -> Path:
    path = path or fabric_settings_path()
    ensure_dir(path.parent)
    write_atomic(path, settings.model_dump_json(indent=2) + "\n", mode=0o600)
    return path
