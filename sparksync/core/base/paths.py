"""Where the client keeps its files.

Without ``SPARKSYNC_HOME`` platformdirs picks the platform's usual places.
With it, every path moves under that directory (``config/``, ``data/``,
``cache/``, ``logs/``, ``state/``) so tests and scripts never touch a user's real files.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from sparksync_agent.atomic import remove_stale_temps
from sparksync_agent.paths import HOME_ENV, sparksync_home

APP_NAME = "sparksync"
LOCAL_AGENT_DIR = "local-agent"

__all__ = [
    "APP_NAME",
    "HOME_ENV",
    "cache_dir",
    "config_dir",
    "data_dir",
    "ensure_dir",
    "local_agent_state_dir",
    "log_dir",
    "remove_interrupted_writes",
    "state_dir",
]

_SWEEP_DEPTH = 3  # config/keys, state/switchyard/gateways: where our atomic writes land


def config_dir() -> Path:
    return _pick("config", platformdirs.user_config_dir)


def data_dir() -> Path:
    return _pick("data", platformdirs.user_data_dir)


def cache_dir() -> Path:
    return _pick("cache", platformdirs.user_cache_dir)


def log_dir() -> Path:
    return _pick("logs", platformdirs.user_log_dir)


def state_dir() -> Path:
    """What lives only while processes run (e.g. the gateways this computer serves now)."""
    return _pick("state", platformdirs.user_state_dir)


def local_agent_state_dir() -> Path:
    """State dir of the agent the client runs for "this computer".

    It lives in the client's data dir, apart from the state dir of an agent
    installed on this machine as a node, so the two never share a token or an
    endpoint file.
    """
    return data_dir() / LOCAL_AGENT_DIR


def remove_interrupted_writes() -> int:
    """Remove the temp files that writers killed mid-write left in the client's dirs (at start-up).

    Only the dirs that exist are walked, a few levels deep; returns how many files went.
    """
    removed = 0
    for top in dict.fromkeys((config_dir(), data_dir(), state_dir())):
        if not top.is_dir():
            continue
        base_depth = len(top.parts)
        for root, dirs, _files in os.walk(top):
            if len(Path(root).parts) - base_depth >= _SWEEP_DEPTH:
                dirs.clear()
            removed += remove_stale_temps(Path(root))
    return removed


def ensure_dir(path: Path) -> Path:
    """Create ``path`` (mode 0700: logs and state may name hosts and paths)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def _pick(sub: str, platform_dir) -> Path:
    home = sparksync_home()
    if home is not None:
        return home / sub
    return Path(platform_dir(APP_NAME, appauthor=False))
