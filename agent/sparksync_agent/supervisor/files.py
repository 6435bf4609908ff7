"""The files of one rank, in its directory under the agent's state dir.

    keeper.json   what the keeper runs (argv, env, cwd, log limits), written by the agent
    output.log    the rank's stdout+stderr, one line per line, rotated by size
    output.log.N  older output (N = 1 is the newest of them)
    output.seq    sequence number of the first line of output.log, and that file's inode
    exit.json     the command's exit status, written by the keeper when it ends

The sequence number of a line is its position in the rank's whole output
(1 = the first line ever), so a client resumes with ``since=N`` across log
rotations, restarts of the rank and restarts of the agent alike.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel

from sparksync_agent.atomic import write_atomic

KEEPER_FILE = "keeper.json"
LOG_FILE = "output.log"
SEQ_FILE = "output.seq"
EXIT_FILE = "exit.json"

LOG_MAX_BYTES = 8 * 1024 * 1024
LOG_BACKUPS = 3
MAX_LINE_BYTES = 64 * 1024  # a line longer than this is split; a runaway line must not eat memory


class KeeperSpec(BaseModel):
    """What the agent tells the keeper to run."""

    version: int = 1
    argv: list[str]
    env: dict[str, str] = {}
    cwd: str | None = None
    max_bytes: int = LOG_MAX_BYTES
    backups: int = LOG_BACKUPS
    cleanup_grace_s: float = 3.0  # for stray descendants once the command has ended


class ExitRecord(BaseModel):
    version: int = 1
    exit_code: int | None = None
    exit_signal: int | None = None
    ended_at: float
    stop_requested: bool = False


class SeqMarker(BaseModel):
    first_seq: int
    inode: int


def write_json(path: Path, model: BaseModel) -> None:
    write_atomic(path, model.model_dump_json(), mode=0o600)


def read_exit(rank_dir: Path) -> ExitRecord | None:
    try:
        return ExitRecord.model_validate_json((rank_dir / EXIT_FILE).read_bytes())
    except (OSError, ValueError):
        return None


def read_marker(rank_dir: Path) -> SeqMarker | None:
    try:
        return SeqMarker.model_validate(json.loads((rank_dir / SEQ_FILE).read_bytes()))
    except (OSError, ValueError):
        return None


def inode_of(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None
