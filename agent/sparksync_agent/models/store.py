"""The models on this node: listing with manifests, receiving a copy, verifying it, deleting.

A copy arrives in ``<store>/.partial/<name>/`` (``receive``), is checked file
by file against the source's manifest with fresh sha256s (``verify``), and
only then moves to ``<store>/<name>/`` (``finalize``). Until that move it is
listed ``partial``, so no workload is ever given half a model.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sparksync_agent.models import checks
from sparksync_agent.models.errors import ModelError
from sparksync_agent.models.manifest import ManifestCache
from sparksync_agent.models.roots import Roots, describe, load_config, resolve, save_config
from sparksync_agent.models.scan import RECEIVING_MARK, Found, model_folder, scan_root
from sparksync_agent.protocol import (
    FinalizeRequest,
    ModelEntry,
    ModelFile,
    ModelList,
    ModelState,
    ReceiveReply,
    ReceiveRequest,
    RootKind,
    RootsConfig,
    VerifyReply,
    VerifyRequest,
)

log = logging.getLogger(__name__)

InUse = Callable[[list[str]], list[str]]  # paths -> ids of running workloads that use any of them


class ModelStore:
    def __init__(self, state_dir: Path, in_use: InUse | None = None):
        self.state_dir = state_dir
        self.cache = ManifestCache(state_dir)
        self.in_use = in_use or (lambda paths: [])
        self._lock = threading.Lock()  # one receive/finalize/delete at a time

    # --- roots ------------------------------------------------------------------------------

    def config(self) -> RootsConfig:
        return load_config(self.state_dir)

    def set_config(self, config: RootsConfig) -> RootsConfig:
        try:
            save_config(self.state_dir, config)
        except ValueError as exc:
            raise ModelError(400, "bad_root", str(exc)) from exc
        return config

    @property
    def roots(self) -> Roots:
        return resolve(self.config())

    # --- listing ------------------------------------------------------------------------------

    def found(self) -> list[Found]:
        roots = self.roots
        out: list[Found] = []
        for path, kind in roots.all():
            try:
                out += scan_root(path, kind, roots.staging if kind is RootKind.store else None)
            except OSError as exc:
                log.warning("cannot read the model root %s: %s", path, exc)
        return out

    def list(self, manifests: bool = True) -> ModelList:
        roots = self.roots
        self.cache.take_hashed()
        models = [self.entry(f, manifests) for f in self.found()]
        self.cache.save()
        return ModelList(
            roots=[describe(p, k) for p, k in roots.all()], models=models, hashed_files=self.cache.take_hashed()
        )

    def entry(self, found: Found, manifest: bool = True) -> ModelEntry:
        files = []
        for rel in found.files:
            path = found.directory / rel
            try:
                size = path.stat().st_size
            except OSError:
                continue
            digest = None
            if manifest and not found.partial:
                digest = self.cache.sha256(path)
            files.append(ModelFile(path=rel, size=size, sha256=digest))
        return ModelEntry(
            name=found.name, format=found.format,
            state=ModelState.partial if found.partial else ModelState.present,
            root=str(found.root), root_kind=found.root_kind, directory=str(found.directory),
            path=str(found.path), size_bytes=sum(f.size for f in files), quantization=found.quantization,
            files=files,
        )  # fmt: skip

    def find(self, name: str, *, partial: bool = False) -> Found | None:
        """The present copy of ``name`` (the store's first), or its partial one when asked."""
        matches = [f for f in self.found() if f.name == name and f.partial == partial]
        matches.sort(key=lambda f: f.root_kind is not RootKind.store)
        return matches[0] if matches else None

    def present(self, name: str) -> Found:
        found = self.find(name)
        if found is None:
            raise ModelError(404, "no_model", f"no model named {name!r} is on this node")
        return found

    # --- receiving a copy -------------------------------------------------------------------------

    def staging_of(self, name: str) -> Path:
        return self.roots.staging / name

    def receive(self, request: ReceiveRequest) -> ReceiveReply:
        checks.name(request.name)
        roots = self.roots
        staging = roots.staging / request.name
        with self._lock:
            if request.repair:
                present = self.find(request.name)
                if present is not None and present.root_kind is RootKind.store and not staging.exists():
                    staging.parent.mkdir(parents=True, exist_ok=True)
                    # Back to staging while it is repaired: listed partial, never used half-fixed.
                    os.replace(present.directory, staging)
            try:
                staging.mkdir(parents=True, exist_ok=True)
                (staging / RECEIVING_MARK).touch()
            except OSError as exc:
                raise ModelError(507, "store_unwritable", f"cannot write to the store {roots.store}: {exc}")
            partial = sum(p.stat().st_size for p in staging.rglob("*") if p.is_file())
            free = shutil.disk_usage(staging).free
        need = max(0, request.size_bytes - partial)
        if not request.repair and need > free:
            raise ModelError(
                409, "no_space",  # a conflict with what the node holds now, not a server fault
                f"{request.name} needs {_gb(need)} more on {roots.store}, which has {_gb(free)} free "
                f"({_gb(request.size_bytes)} in all, {_gb(partial)} already there). "
                "Free some space, or set another store for this node.",
            )  # fmt: skip
        return ReceiveReply(
            name=request.name, staging=str(staging), store=str(roots.store), free_bytes=free, partial_bytes=partial
        )

    def staged(self, name: str, files: Sequence[str]) -> tuple[Path, dict[str, int]]:
        """The staging folder of ``name`` and the size of each of ``files`` in it, for a push onwards.

        The folder is this agent's own (found by the name, never a path a client
        gives); each file must be a regular file inside it, not a link: what a
        push from here sends is only what rsync wrote into the copy.
        """
        checks.name(name)
        directory = self.staging_of(name)
        if not directory.is_dir():
            raise ModelError(404, "no_staging", f"no copy of {name} is being received here")
        if not files:
            raise ModelError(400, "bad_files", "a push from the staging folder names its files")
        top = directory.resolve()
        sizes: dict[str, int] = {}
        for rel in files:
            path = _inside(directory, rel)
            if path.is_symlink() or not path.is_file() or top not in path.resolve().parents:
                raise ModelError(404, "no_file", f"{rel!r} is not a received file of {name} here")
            sizes[rel] = path.stat().st_size
        return directory, sizes

    def verify(self, request: VerifyRequest) -> VerifyReply:
        checks.name(request.name)
        if request.staging:
            directory = self.staging_of(request.name)
            if not directory.is_dir():
                raise ModelError(404, "no_staging", f"no copy of {request.name} is being received here")
        else:
            directory = self.present(request.name).directory
        mismatched, missing, hashed = [], [], 0
        to_hash = []
        for want in request.files:
            path = _inside(directory, want.path)
            try:
                size = path.stat().st_size
            except OSError:
                missing.append(want.path)
                continue
            if size != want.size:
                mismatched.append(want.path)
                continue
            to_hash.append((want, path))
            if want.path not in request.cached:
                hashed += size
        # Fresh: a flipped byte keeps the size and the mtime, which the cache keys on. The files
        # are hashed side by side (hashlib lets go of the GIL), so a check costs less than a copy.
        workers = max(1, min(len(to_hash), os.cpu_count() or 1, 8))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="model-verify") as pool:
            cached = set(request.cached)
            digests = list(pool.map(
                lambda item: self.cache.sha256(item[1], fresh=item[0].path not in cached), to_hash))  # fmt: skip
        for (want, _path), digest in zip(to_hash, digests):
            if want.sha256 is not None and digest != want.sha256:
                mismatched.append(want.path)
        order = {f.path: i for i, f in enumerate(request.files)}
        mismatched.sort(key=order.__getitem__)
        self.cache.save()
        wanted = {f.path for f in request.files}
        found = model_folder(directory, request.name, RootKind.store, directory, partial=True)
        extra = [f for f in (found.files if found else []) if f not in wanted]
        ok = not mismatched and not missing
        return VerifyReply(
            name=request.name, ok=ok, mismatched=mismatched, missing=missing, extra=extra, hashed_bytes=hashed
        )

    def finalize(self, request: FinalizeRequest) -> ModelEntry:
        checks.name(request.name)
        roots = self.roots
        staging = self.staging_of(request.name)
        target = roots.store / request.name
        with self._lock:
            if not staging.is_dir():
                raise ModelError(404, "no_staging", f"no copy of {request.name} is being received here")
            wanted = {f.path for f in request.files}
            for path in sorted(staging.rglob("*"), reverse=True):
                rel = path.relative_to(staging).as_posix()
                if (path.is_file() or path.is_symlink()) and rel not in wanted:
                    path.unlink()  # left from an older copy; the manifest is what counts
            # Checked before the move: a staged folder that holds no model never reaches the store.
            if model_folder(staging, request.name, RootKind.store, roots.store) is None:
                raise ModelError(409, "not_a_model", f"the copy of {request.name} holds no GGUF or safetensors model")
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
            _prune_empty(staging.parent, roots.staging)
            for f in request.files:
                if f.sha256:
                    self.cache.remember(target / f.path, f.sha256)
            self.cache.save()
        found = model_folder(target, request.name, RootKind.store, roots.store)
        if found is None:
            raise ModelError(500, "not_a_model", f"{request.name} holds no GGUF or safetensors model")
        return self.entry(found)

    # --- deleting ---------------------------------------------------------------------------------

    def delete(self, name: str, partial: bool = False) -> None:
        checks.name(name)
        found = self.find(name, partial=partial)
        if found is None and not partial:
            found = self.find(name, partial=True)
        if found is None:
            raise ModelError(404, "no_model", f"no model named {name!r} is on this node")
        loose = found.path.is_file() and found.path.parent == found.root  # a GGUF file at the root's top
        users = self.in_use([str(found.path)] if loose else [str(found.directory), str(found.path)])
        if users:
            raise ModelError(
                409, "model_in_use",
                f"{name} is used by running workload {', '.join(users)} here; stop it first",
            )  # fmt: skip
        with self._lock:
            folder = found.directory
            if found.root_kind is RootKind.hf_cache:
                folder = _hf_repo_folder(found)
            if loose:
                found.path.unlink()
            else:
                shutil.rmtree(folder)
            self.cache.forget_under(folder)
            self.cache.save()
        log.info("deleted model %s (%s)", name, folder)


def _hf_repo_folder(found: Found) -> Path:
    """models--ORG--NAME: the snapshot, its blobs and refs go together."""
    for parent in found.directory.parents:
        if parent.name.startswith("models--"):
            return parent
    return found.directory


def _inside(directory: Path, rel: str) -> Path:
    if ".." in Path(rel).parts or Path(rel).is_absolute():
        raise ModelError(400, "bad_path", f"{rel!r} is not a path inside the model")
    return directory / rel


def _prune_empty(folder: Path, stop: Path) -> None:
    while folder != stop and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"
