"""Where the agent keeps its state.

``SPARKSYNC_HOME`` moves every path the client and the agent write, so tests
and scripts never touch a user's real files. Without it, platformdirs picks
the platform's usual state directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

HOME_ENV = "SPARKSYNC_HOME"


def sparksync_home() -> Path | None:
    """The directory named by ``SPARKSYNC_HOME``, or None when it is unset."""
    value = os.environ.get(HOME_ENV)
    return Path(value).expanduser() if value else None


def default_state_dir() -> Path:
    home = sparksync_home()
    if home is not None:
        return home / "agent"
    return Path(platformdirs.user_state_dir("sparksync-agent", appauthor=False))
