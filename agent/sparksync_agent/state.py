"""The agent's state directory: token, node id and the running endpoint.

Layout (all files mode 0600, the directory 0700)::

    token          bearer token, generated at first start
    node_id        stable identity of this node across restarts
    endpoint.json  port, pid and run id of the running agent (port 0 support)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import secrets
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from sparksync_agent.atomic import write_atomic
from sparksync_agent.errors import StateDirError, TokenPermissionError

log = logging.getLogger(__name__)

TOKEN_FILE = "token"
NODE_ID_FILE = "node_id"
ENDPOINT_FILE = "endpoint.json"


class Endpoint(BaseModel):
    """What a running agent publishes about itself in its state directory."""

    version: int = 1
    port: int
    pid: int
    run_id: str


def prepare_state_dir(state_dir: Path) -> Path:
    """Create the state directory (0700) and prove it can be written."""
    state_dir = Path(state_dir)
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        probe = state_dir / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise StateDirError(
            f"cannot write the state directory {state_dir}: {exc.strerror or exc}. "
            "Pick another with --state-dir or SPARKSYNC_HOME, or fix its permissions."
        ) from exc
    return state_dir


def load_or_create_token(state_dir: Path) -> str:
    """The bearer token; refuses a token file that others can read."""
    path = Path(state_dir) / TOKEN_FILE
    try:
        st = path.stat()
    except FileNotFoundError:
        token = secrets.token_urlsafe(32)
        write_atomic(path, token + "\n", mode=0o600)
        log.info("generated a new API token in %s", path)
        return token
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise TokenPermissionError(
            f"the token file {path} has mode {stat.S_IMODE(st.st_mode):04o}, readable by others. "
            f"Run 'chmod 600 {path}' and start the agent again."
        )
    token = path.read_text().strip()
    if not token:
        raise TokenPermissionError(f"the token file {path} is empty. Delete it to have a new token made.")
    return token


def load_or_create_node_id(state_dir: Path) -> str:
    """A node id that stays the same across restarts of the agent.

    The client may write it first (deploy gives the agent the node's id; the
    desktop app reads this computer's before its local agent runs), so a new
    id is only created, never put over one that appeared meanwhile.
    """
    path = Path(state_dir) / NODE_ID_FILE
    node_id = _read_node_id(path)
    if node_id:
        return node_id
    # Read and create as one step among the processes making it at once: without the lock,
    # one that found the file empty could replace the id another had just made.
    with _locked(path.parent):
        node_id = _read_node_id(path)
        if node_id:
            return node_id
        node_id = uuid.uuid4().hex
        try:  # an empty one (seen under the lock) is replaced; otherwise create-only
            write_atomic(path, node_id + "\n", mode=0o600, replace=path.exists())
            return node_id
        except FileExistsError:
            pass  # the client (which takes no lock) made it first: theirs it is
    return load_or_create_node_id(state_dir)  # read again once the lock is released


def _read_node_id(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive flock on the directory itself: no lock file is left in the state dir."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_endpoint(state_dir: Path, endpoint: Endpoint) -> None:
    write_atomic(Path(state_dir) / ENDPOINT_FILE, endpoint.model_dump_json(), mode=0o600)


def read_endpoint(state_dir: Path) -> Endpoint | None:
    """The endpoint of a live agent for this state dir, or None."""
    path = Path(state_dir) / ENDPOINT_FILE
    try:
        endpoint = Endpoint.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None
    return endpoint if pid_alive(endpoint.pid) else None


def clear_endpoint(state_dir: Path, run_id: str) -> None:
    """Remove endpoint.json if it is still ours (a newer agent may own it)."""
    path = Path(state_dir) / ENDPOINT_FILE
    try:
        if Endpoint.model_validate_json(path.read_bytes()).run_id == run_id:
            path.unlink()
    except (FileNotFoundError, ValueError):
        pass


def read_token(state_dir: Path) -> str | None:
    try:
        return (Path(state_dir) / TOKEN_FILE).read_text().strip() or None
    except OSError:
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True
