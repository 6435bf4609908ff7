"""Gateways the user asked the app to watch by URL: ``<config dir>/switchyard-gateways.json``.

Local gateways announce themselves and gateways on nodes are workloads, so
this list is only for the rest (a gateway started by hand elsewhere). One
versioned pydantic file, written atomically.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.paths import config_dir, ensure_dir
from sparksync.switchyard.errors import SwitchyardError

WATCHED_VERSION = 1
WATCHED_FILE = "switchyard-gateways.json"


class WatchedGateways(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = WATCHED_VERSION
    urls: list[str] = Field(default_factory=list)


def watched_path() -> Path:
    return config_dir() / WATCHED_FILE


def load_watched(path: Path | None = None) -> list[str]:
    path = path or watched_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SwitchyardError(f"cannot read {path} ({exc.strerror}); fix its permissions") from None
    try:
        data = WatchedGateways.model_validate_json(raw)
    except ValidationError as exc:
        raise SwitchyardError(
            f"{path} is not a valid list of gateways ({exc.errors()[0]['msg']}); move it aside"
        ) from None
    if data.version > WATCHED_VERSION:
        raise SwitchyardError(f"{path} was written by a newer SparkSync; upgrade SparkSync")
    return data.urls


def normalized_url(url: str) -> str:
    """``http(s)://host:port`` without a trailing ``/``, ``/v1`` or ``/metrics``."""
    url = url.strip().rstrip("/")
    for suffix in ("/metrics", "/v1"):
        url = url.removesuffix(suffix)
    if not url.startswith(("http://", "https://")) or "://" == url[-3:]:
        raise SwitchyardError(f"{url!r} is not a gateway address; write it as http://HOST:PORT")
    return url


def add_watched(url: str, path: Path | None = None) -> str:
    url, path = normalized_url(url), path or watched_path()
    urls = load_watched(path)
    if url not in urls:
        ensure_dir(path.parent)
        write_atomic(path, WatchedGateways(urls=[*urls, url]).model_dump_json(indent=2) + "\n", mode=0o600)
    return url


def remove_watched(url: str, path: Path | None = None) -> None:
    path = path or watched_path()
    urls = load_watched(path)
    kept = [u for u in urls if u != normalized_url(url)]
    if kept != urls:
        write_atomic(path, WatchedGateways(urls=kept).model_dump_json(indent=2) + "\n", mode=0o600)
