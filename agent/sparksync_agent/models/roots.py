"""The folders a node keeps models in, and how full their disks are.

Defaults: SparkSync's own models folder (the *store*: ``$SPARKSYNC_HOME/models``,
else ``~/.local/share/sparksync/models``), where copies land, and the Hugging
Face cache (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
``~/.cache/huggingface/hub``), where ``model fetch`` downloads. The user may
move either and add more (``models.json`` in the agent's state dir).
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import platformdirs
from pydantic import ValidationError

from sparksync_agent.atomic import write_atomic
from sparksync_agent.paths import sparksync_home
from sparksync_agent.protocol import ModelRoot, RootKind, RootsConfig

log = logging.getLogger(__name__)

CONFIG_FILE = "models.json"
STAGING = ".partial"  # under the store: copies in progress, listed as partial


def default_store() -> Path:
    home = sparksync_home()
    if home is not None:
        return home / "models"
    return Path(platformdirs.user_data_dir("sparksync", appauthor=False)) / "models"


def default_hf_cache() -> Path:
    """Where huggingface_hub itself puts downloads, by its own environment variables."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


@dataclass(frozen=True)
class Roots:
    store: Path
    hf_cache: Path
    extra: tuple[Path, ...] = ()

    def all(self) -> list[tuple[Path, RootKind]]:
        found = [(self.store, RootKind.store), (self.hf_cache, RootKind.hf_cache)]
        found += [(p, RootKind.extra) for p in self.extra]
        seen: set[Path] = set()
        return [(p, k) for p, k in found if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]

    @property
    def staging(self) -> Path:
        return self.store / STAGING


def load_config(state_dir: Path) -> RootsConfig:
    path = state_dir / CONFIG_FILE
    try:
        return RootsConfig.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return RootsConfig()
    except (OSError, ValidationError) as exc:
        log.warning("ignoring %s, which cannot be read (%s); using the default model roots", path, exc)
        return RootsConfig()


def save_config(state_dir: Path, config: RootsConfig) -> None:
    for value in [config.store, config.hf_cache, *config.extra]:
        if value is not None and not Path(value).expanduser().is_absolute():
            raise ValueError(f"a model root must be an absolute path, not {value!r}")
    write_atomic(state_dir / CONFIG_FILE, config.model_dump_json(indent=2) + "\n", 0o600)


def resolve(config: RootsConfig) -> Roots:
    def path(value: str | None, default: Path) -> Path:
        return Path(value).expanduser() if value else default

    return Roots(
        store=path(config.store, default_store()),
        hf_cache=path(config.hf_cache, default_hf_cache()),
        extra=tuple(Path(p).expanduser() for p in config.extra),
    )


def describe(path: Path, kind: RootKind) -> ModelRoot:
    """A root with its disk's free space (of the nearest existing parent when it is not made yet)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free: int | None = None
    total: int | None = None
    try:
        usage = shutil.disk_usage(probe)
        free, total = usage.free, usage.total
    except OSError:
        pass
    writable = os.access(probe, os.W_OK)
    return ModelRoot(
        path=str(path), kind=kind, exists=path.is_dir(), free_bytes=free, total_bytes=total, writable=writable
    )
