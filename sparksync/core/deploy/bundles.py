"""Which bundle a node gets: the cached one for its target (built when missing), or one given.

Shared by all the nodes of one deploy, so eight nodes of one kind verify
(and, with internet, build) their bundle once.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sparksync.core.bundle import BundleError, BundleManifest, Target, ensure_bundle, verify_bundle
from sparksync.core.bundle.archive import root_name
from sparksync.core.deploy.errors import PrecheckError


@dataclass(frozen=True)
class ReadyBundle:
    path: Path
    manifest: BundleManifest
    sha256: str
    size: int

    @property
    def version(self) -> str:
        return self.manifest.agent_version

    @property
    def folder(self) -> str:
        """The folder the archive unpacks to."""
        return root_name(self.path.name)


class BundleSource:
    """``get(target)`` -> a verified bundle; ``explicit`` overrides the cache for every target it fits."""

    def __init__(self, explicit: Path | None = None, progress: Callable[[str], None] | None = None):
        self.explicit = Path(explicit) if explicit is not None else None
        self.progress = progress
        self._ready: dict[Path, ReadyBundle] = {}
        self._by_target: dict[Target, ReadyBundle] = {}
        self._failed: dict[Target, BundleError] = {}
        self._lock = threading.Lock()

    def get(self, target: Target, node: str) -> ReadyBundle:
        with self._lock:  # one build or verify at a time; the others then find it ready
            ready = self._by_target.get(target) or self._resolve(target)
        if ready.manifest.target != target:
            line = (
                f"{node}: the bundle {ready.path.name} is for {ready.manifest.target.describe()}, but the "
                f"node needs {target.describe()}; build that one with 'sparksync bundle build --platform "
                f"{target.platform} --python {target.python}'"
            )
            raise PrecheckError(line)
        return ready

    def _resolve(self, target: Target) -> ReadyBundle:
        """The bundle for ``target``, found (verified) or built once; the nodes after the first reuse it.

        Looking in the cache verifies the whole archive (17 MiB unpacked and hashed): done per
        node, eight nodes of one kind took turns at it under the lock before any could go on.
        """
        if target in self._failed:  # e.g. no internet: say it once per node, do not retry it per node
            raise self._failed[target]
        try:
            path = self.explicit or ensure_bundle(target.platform, target.python, progress=self.progress)
            ready = self._ready.get(path) or self._load(path)
        except BundleError as exc:
            self._failed[target] = exc
            raise
        self._ready[path] = self._by_target[target] = ready
        return ready

    @staticmethod
    def _load(path: Path) -> ReadyBundle:
        manifest = verify_bundle(path)
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        return ReadyBundle(path, manifest, digest.hexdigest(), path.stat().st_size)
