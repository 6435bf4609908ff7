"""The cluster's fabric settings file: ``<config dir>/fabric.json`` (a ``FabricSettings``).

Absent means the defaults (switch topology, NCCL). A file that cannot be
read is an error naming it, never silently replaced by the defaults: a wrong
collective backend would launch a workload that then runs slowly or hangs.

Per-node settings (``primary_interface``) are filed by node id, so a rename
keeps them; in memory they are by the node's name now, as the launch code
names nodes. Version 1 filed them by name: reading it still finds each
name's node, and the next save writes ids.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.paths import config_dir, ensure_dir
from sparksync.core.nodes.identity import NodeNames
from sparksync.core.workloads.errors import FabricError, describe_validation
from sparksync.core.workloads.fabric import FABRIC_VERSION, FabricSettings

FABRIC_FILE = "fabric.json"


def fabric_settings_path() -> Path:
    return config_dir() / FABRIC_FILE


def load_fabric_settings(
    path: Path | None = None, names: Callable[[], NodeNames] = NodeNames.current
) -> FabricSettings:
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
    if not settings.primary_interface:
        return settings
    known = names()

    def name_of(key: str) -> str:
        node_id = key if key in known.names else known.id_of(key)  # a name: version 1, or no node had it
        return (known.name_of(node_id) if node_id is not None else None) or key

    return settings.model_copy(
        update={"primary_interface": {name_of(k): v for k, v in settings.primary_interface.items()}}
    )


def save_fabric_settings(
    settings: FabricSettings, path: Path | None = None, names: Callable[[], NodeNames] = NodeNames.current
) -> Path:
    path = path or fabric_settings_path()
    known = names() if settings.primary_interface else NodeNames()
    by_id = {known.id_of(name) or name: value for name, value in settings.primary_interface.items()}
    saved = settings.model_copy(update={"version": FABRIC_VERSION, "primary_interface": by_id})
    ensure_dir(path.parent)
    write_atomic(path, saved.model_dump_json(indent=2) + "\n", mode=0o600)
    return path
