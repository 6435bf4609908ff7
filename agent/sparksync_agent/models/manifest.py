"""sha256 per model file, cached by size, mtime and inode so a repeat listing hashes nothing.

The cache is one JSON file in the agent's state dir, keyed by the file's real
path (a Hugging Face snapshot's symlink resolves to its blob). A file whose
size or mtime changed is hashed again; ``fresh=True`` hashes regardless, which
is what a verification after a copy does (a flipped byte keeps both).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path

from sparksync_agent.atomic import write_atomic

log = logging.getLogger(__name__)

CACHE_FILE = "model-manifests.json"
CACHE_VERSION = 2  # 2: the inode is part of the key (a file replaced by rsync is a new one)
CHUNK = 4 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        view = memoryview(bytearray(CHUNK))
        while True:
            n = fh.readinto(view)
            if not n:
                break
            digest.update(view[:n])
    return digest.hexdigest()


class ManifestCache:
    """Thread-safe; ``save()`` writes it when something changed."""

    def __init__(self, state_dir: Path):
        self.path = state_dir / CACHE_FILE
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[int, int, int, str]] = self._load()
        self._dirty = False
        self.hashed = 0  # files hashed since the last take_hashed()
        self.hashed_bytes = 0

    def _load(self) -> dict[str, tuple[int, int, int, str]]:
        try:
            data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("the manifest cache %s cannot be read (%s); files will be hashed again", self.path, exc)
            return {}
        if data.get("version") != CACHE_VERSION:
            return {}
        return {k: (int(v[0]), int(v[1]), int(v[2]), str(v[3])) for k, v in data.get("files", {}).items()}

    def sha256(self, path: Path, *, fresh: bool = False) -> str:
        real = os.path.realpath(path)
        st = os.stat(real)
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        with self._lock:
            known = self._entries.get(real)
        if known is not None and not fresh and known[:3] == key:
            return known[3]
        digest = sha256_file(Path(real))
        with self._lock:
            self._entries[real] = (*key, digest)
            self._dirty = True
            self.hashed += 1
            self.hashed_bytes += st.st_size
        return digest

    def remember(self, path: Path, digest: str) -> None:
        """Record a hash known by other means (a verified copy), for the file as it is now."""
        real = os.path.realpath(path)
        st = os.stat(real)
        with self._lock:
            self._entries[real] = (st.st_size, st.st_mtime_ns, st.st_ino, digest)
            self._dirty = True

    def forget_under(self, folder: Path) -> None:
        prefix = os.path.realpath(folder) + os.sep
        with self._lock:
            for key in [k for k in self._entries if k.startswith(prefix)]:
                del self._entries[key]
                self._dirty = True

    def take_hashed(self) -> int:
        with self._lock:
            n, self.hashed = self.hashed, 0
        return n

    def save(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            # Entries for files that are gone are dropped, so the cache does not grow forever.
            files = {k: list(v) for k, v in self._entries.items() if os.path.exists(k)}
            self._dirty = False
        write_atomic(self.path, json.dumps({"version": CACHE_VERSION, "files": files}), 0o600)
