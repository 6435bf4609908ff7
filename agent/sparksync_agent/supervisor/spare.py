"""Starting keepers fast: forked from a spare keeper that has done its imports in advance.

A fresh ``python -m sparksync_agent.supervisor.keeper`` spends 0.1-0.8 s
starting Python and importing before the rank's command runs; that delay
is added to every stage of a workload start. The agent therefore keeps one
spare keeper process waiting (see ``keeper.serve_spare``): a rank start sends
it the rank directory and gets back the pid of a forked keeper a few
milliseconds later. The spare stays for the next rank.

Whenever the spare is not there or not ready (still importing, crashed,
refused), a rank gets a fresh keeper as before and a new spare is started
for the next one; a start never waits for the spare.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import subprocess
import sys
from pathlib import Path

import psutil

from sparksync_agent.supervisor.keeper import ERR_FILE, SPARE_FLAG
from sparksync_agent.supervisor.processes import kill_tree

log = logging.getLogger(__name__)

KEEPER_MODULE = "sparksync_agent.supervisor.keeper"
REPLY_TIMEOUT_S = 30.0  # a fork answers in milliseconds; this only bounds a wedged spare
CLOSE_TIMEOUT_S = 5.0


class KeeperLauncher:
    """Starts the keeper of a rank: from the spare when it is ready, else a fresh process."""

    def __init__(self, root: Path):
        self.root = root
        self._spare: subprocess.Popen | None = None
        self._spare_ready = False
        self._wanted = False  # from prepare() to close(): the supervisor runs and wants a spare

    def launch(self, rank_dir: Path) -> tuple[int, subprocess.Popen | None]:
        """The new keeper's pid, and its Popen when this agent is its parent (a fresh start).

        Raises OSError when no keeper could start.
        """
        pid = self._fork_from_spare(rank_dir)
        if pid is None:
            proc = start_fresh(rank_dir)
            if self._wanted:
                self.prepare()  # for the next rank
            return proc.pid, proc
        return pid, None

    def prepare(self) -> None:
        """Start a spare unless one is running; a failure only costs speed."""
        self._wanted = True
        if self._spare is not None and self._spare.poll() is None:
            return
        self._end_spare()
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            with open(self.root / "spare.err", "ab") as err:
                self._spare = subprocess.Popen(
                    [sys.executable, "-m", KEEPER_MODULE, SPARE_FLAG, str(self.root)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=self.root,
                )  # fmt: skip
        except OSError as exc:
            log.warning("could not start a spare keeper (ranks start the slower way): %s", exc)
            self._spare = None
        self._spare_ready = False

    def close(self) -> None:
        """End the spare (EOF on its stdin); keepers it forked keep running."""
        self._wanted = False
        self._end_spare()

    def _end_spare(self) -> None:
        spare, self._spare = self._spare, None
        if spare is None:
            return
        assert spare.stdin is not None and spare.stdout is not None, "started with both as pipes"
        with contextlib.suppress(OSError):  # a request may still sit in the buffer of a dead spare's pipe
            spare.stdin.close()
        try:
            spare.wait(CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            spare.kill()
            spare.wait()
        spare.stdout.close()

    # --- internals -----------------------------------------------------------------

    def _fork_from_spare(self, rank_dir: Path) -> int | None:
        """The pid of a keeper forked by the spare; None when the spare cannot serve now."""
        spare = self._spare
        if spare is None or spare.poll() is not None or not self._is_ready(spare):
            return None
        assert spare.stdin is not None, "started with stdin as a pipe"
        try:
            spare.stdin.write(json.dumps(str(rank_dir)).encode() + b"\n")
            spare.stdin.flush()
            reply = _read_line(spare, REPLY_TIMEOUT_S)
        except OSError as exc:
            reply = f"error {exc}"
        if reply.isdigit():
            return int(reply)
        log.warning("the spare keeper failed (%s); starting a fresh one", reply or "no answer")
        self._drop_spare(spare, rank_dir)
        return None

    def _is_ready(self, spare: subprocess.Popen) -> bool:
        """True once the spare has said 'ready' (its imports are done); never waits."""
        if not self._spare_ready:
            self._spare_ready = _read_line(spare, 0.0) == "ready"
        return self._spare_ready

    def _drop_spare(self, spare: subprocess.Popen, rank_dir: Path) -> None:
        """Kill a spare that failed, and a keeper it may have forked for ``rank_dir`` regardless."""
        for pid in _keepers_forked_for(spare.pid, rank_dir):
            kill_tree(pid)
        spare.kill()
        self._end_spare()


def start_fresh(rank_dir: Path) -> subprocess.Popen:
    """A keeper started as a new Python process: the way when no spare is ready."""
    with open(rank_dir / ERR_FILE, "ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", KEEPER_MODULE, str(rank_dir)],
            stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd=rank_dir, start_new_session=True,
        )  # fmt: skip


def _read_line(spare: subprocess.Popen, timeout: float) -> str:
    """One line from the spare within ``timeout`` ('' when none came).

    Byte by byte from the raw pipe: no buffer may hold back a later line from select().
    """
    assert spare.stdout is not None, "started with stdout as a pipe"
    fd, line = spare.stdout.fileno(), b""
    while select.select([fd], [], [], timeout)[0]:
        byte = os.read(fd, 1)
        if not byte or byte == b"\n":
            break
        line += byte
    return line.decode(errors="replace").strip()


def _keepers_forked_for(spare_pid: int, rank_dir: Path) -> list[int]:
    """The spare's children working in ``rank_dir``: a forked keeper's first step is to go there."""
    found = []
    try:
        for child in psutil.Process(spare_pid).children():
            with contextlib.suppress(psutil.Error):
                if child.cwd() == os.path.realpath(rank_dir):
                    found.append(child.pid)
    except psutil.Error:
        pass
    return found
