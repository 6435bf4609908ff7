"""Gateways served on this computer say so: one small file each, while they listen.

``sparksync switchyard serve`` writes ``<state dir>/switchyard/gateways/<pid>-<port>.json``
once its socket listens and removes it when it stops, so the app finds the
local gateways without being told. A gateway that died without cleaning up
leaves a file behind: a file whose process is gone (or whose pid now belongs
to another process, told apart by the process's start time) is ignored and
removed by the next reader.

The file names where the API key comes from (an environment variable's
name, a file's path), never the key itself.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
from pydantic import BaseModel, ConfigDict, ValidationError
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.paths import ensure_dir, state_dir
from sparksync.switchyard.config import SwitchyardConfig

log = logging.getLogger(__name__)

ANNOUNCE_VERSION = 1
START_TIME_SLACK_S = 1.0  # psutil's start time is rounded differently on some platforms


class Announcement(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: int = ANNOUNCE_VERSION
    pid: int
    process_started: float  # the process's start time (psutil), to tell a reused pid apart
    url: str  # http://host:port, no /v1
    policy: str
    pools: list[str]
    api_key_env: str | None = None
    api_key_file: str | None = None
    announced_at: float


def gateways_dir() -> Path:
    return state_dir() / "switchyard" / "gateways"


@contextmanager
def announced(config: SwitchyardConfig, url: str) -> Iterator[Path]:
    """Announce the gateway at ``url`` while the block runs (this process serves it)."""
    me = psutil.Process()
    note = Announcement(
        pid=me.pid,
        process_started=me.create_time(),
        url=url,
        policy=config.policy.kind,
        pools=list(config.pools),
        api_key_env=config.listen.api_key_env,
        api_key_file=str(config.listen.api_key_file) if config.listen.api_key_file else None,
        announced_at=time.time(),
    )
    path = ensure_dir(gateways_dir()) / f"{me.pid}-{url.rsplit(':', 1)[-1]}.json"
    write_atomic(path, note.model_dump_json(indent=2) + "\n", mode=0o600)
    log.info("announced the gateway at %s in %s", url, path)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def announced_gateways() -> list[Announcement]:
    """The gateways served on this computer now, oldest first; stale files are removed."""
    found = []
    folder = gateways_dir()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        note = _read(path)
        if note is None:
            continue
        if not _alive(note):
            log.info("removing the announcement of a gateway that no longer runs: %s", path)
            path.unlink(missing_ok=True)
            continue
        found.append(note)
    return sorted(found, key=lambda n: n.announced_at)


def api_key_of(note: Announcement) -> str | None:
    """The key a reader needs, from the place the gateway's config names (None when it names none)."""
    if note.api_key_env:
        value = os.environ.get(note.api_key_env, "").strip()
        if value:
            return value
    if note.api_key_file:
        try:
            return Path(note.api_key_file).expanduser().read_text(encoding="utf-8").strip() or None
        except OSError:
            return None
    return None


def _read(path: Path) -> Announcement | None:
    try:
        note = Announcement.model_validate_json(path.read_bytes())
    except FileNotFoundError:  # its gateway stopped while we looked
        return None
    except (OSError, ValidationError) as exc:
        log.warning("ignoring the unreadable gateway announcement %s: %s", path, exc)
        return None
    if note.version > ANNOUNCE_VERSION:
        log.warning("ignoring %s: written by a newer SparkSync (format %d)", path, note.version)
        return None
    return note


def _alive(note: Announcement) -> bool:
    try:
        started = psutil.Process(note.pid).create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True  # someone else's process with that pid would not have written into our state dir
    return abs(started - note.process_started) <= START_TIME_SLACK_S
