"""The keeper: one small process per rank that runs its command and outlives the agent.

    python -m sparksync_agent.supervisor.keeper RANK_DIR

The agent starts it in a new session, so the keeper leads the rank's process
group; the command runs in that same group. The keeper

- copies the command's stdout+stderr, line by line, into ``output.log``
  through a rotating file handler, numbering lines across rotations
  (``output.seq``). The pipe belongs to the keeper, not to the agent, so the
  output keeps flowing (and no writer blocks on a full pipe) while the agent
  restarts;
- is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a descendant whose parent
  exits is re-parented to the keeper instead of init, so nothing the command
  started can slip out of reach, not even a daemon that calls ``setsid()``;
- on SIGTERM, passes the signal on to descendants that left the group, and
  keeps copying output until the command has ended;
- once the command has ended, stops every descendant still there (SIGTERM,
  then SIGKILL after a grace), writes ``exit.json`` and exits.

Starting Python and importing all this takes 0.1-0.8 s, most of a rank's
start. So the agent keeps a *spare* ready in advance:

    python -m sparksync_agent.supervisor.keeper --spare WORKLOADS_DIR

It imports everything, says ``ready`` on stdout, then reads one rank
directory (a JSON string) per line on stdin and forks; the child becomes that
rank's keeper exactly as above (new session, the rank directory as its cwd,
``keeper.err`` as stdout/stderr) and the spare answers the child's pid. The
spare ends at EOF on stdin, that is when the agent closes the pipe or dies;
its keepers go on (re-parented, as after an agent restart).
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import logging.handlers
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import psutil

from sparksync_agent.supervisor.files import (
    EXIT_FILE,
    KEEPER_FILE,
    LOG_FILE,
    MAX_LINE_BYTES,
    SEQ_FILE,
    ExitRecord,
    KeeperSpec,
    SeqMarker,
    inode_of,
    read_marker,
    write_json,
)

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36
READ_BYTES = 64 * 1024
COALESCE_S = 0.05
NOTE = "[sparksync-agent] "
ERR_FILE = "keeper.err"  # the keeper's own stdout+stderr (a traceback, should it crash)
SPARE_FLAG = "--spare"
SPARE_NAME = "sparksync-spare"
SPARE_REAP_S = 1.0  # how often an idle spare collects keepers that have ended  # marks the keeper's own lines among the command's output


class SeqRotatingHandler(logging.handlers.RotatingFileHandler):
    """Writes each record as one line and records the first line number of each new file."""

    def __init__(self, rank_dir: Path, max_bytes: int, backups: int):
        self.rank_dir = rank_dir
        super().__init__(rank_dir / LOG_FILE, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
        self.setFormatter(logging.Formatter("%(message)s"))
        self.next_seq = self._resume_seq()

    def _resume_seq(self) -> int:
        """Continue the numbering of an existing log (a restart of the rank)."""
        path, marker = self.rank_dir / LOG_FILE, read_marker(self.rank_dir)
        first = marker.first_seq if marker and marker.inode == inode_of(path) else 1
        with open(path, "rb") as fh:
            count = sum(1 for _ in fh)
        self._write_marker(first)
        return first + count

    def _write_marker(self, first_seq: int) -> None:
        assert self.stream is not None, "opened at once (no delay) and again by every rollover"
        write_json(
            self.rank_dir / SEQ_FILE,
            SeqMarker(first_seq=first_seq, inode=os.fstat(self.stream.fileno()).st_ino),
        )

    def doRollover(self) -> None:
        super().doRollover()
        # The line about to be written is the first of the new file.
        self._write_marker(self.next_seq)

    def emit(self, record: logging.LogRecord) -> None:
        # One record carries every complete line one read of the pipe returned.
        super().emit(record)
        self.next_seq += getattr(record, "line_count", 1)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> None:
    if _libc().prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _die_with_keeper() -> None:
    # Runs in the command's process before exec: if the keeper is killed outright,
    # the command gets SIGKILL instead of running on unwatched.
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Keeper:
    def __init__(self, rank_dir: Path):
        self.rank_dir = rank_dir
        self.spec = KeeperSpec.model_validate_json((rank_dir / KEEPER_FILE).read_bytes())
        self.handler: SeqRotatingHandler | None = None  # opened once the command runs: it waits for nobody
        self.stop_requested = False
        self.child: subprocess.Popen | None = None

    def _open_log(self) -> None:
        self.handler = SeqRotatingHandler(self.rank_dir, self.spec.max_bytes, self.spec.backups)

    def line(self, text: str) -> None:
        self.lines([text])

    def lines(self, texts: list[str]) -> None:
        # handle() takes the handler's lock: the output thread and the main thread both write.
        assert self.handler is not None, "lines are written only once the log is open"
        self.handler.handle(logging.makeLogRecord({"msg": "\n".join(texts), "line_count": len(texts)}))

    def run(self) -> int:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._on_stop_signal)
        try:
            self.child = self._spawn()
        except OSError as exc:
            self._open_log()
            self.line(f"{NOTE}cannot start {self.spec.argv[0]!r}: {exc.strerror or exc}")
            self._record(127, None)
            return 0
        self._open_log()  # the command's first lines wait in the pipe meanwhile
        reader = threading.Thread(target=self._copy_output, args=(self.child.stdout,), daemon=True)
        reader.start()
        code, sig = self._wait_for_command(self.child)
        self._stop_descendants()
        reader.join(timeout=5.0)
        self.line(f"{NOTE}the command ended: " + (f"signal {sig}" if sig else f"exit status {code}"))
        self._record(code, sig)
        return 0

    def _spawn(self) -> subprocess.Popen:
        env = {**os.environ, **self.spec.env}
        return subprocess.Popen(
            self.spec.argv, env=env, cwd=self.spec.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, close_fds=True,
            preexec_fn=_die_with_keeper,  # noqa: PLW1509 - no thread runs yet in the keeper
        )  # fmt: skip

    def _copy_output(self, pipe) -> None:
        """Copy the pipe to the log, all complete lines of each read in one write.

        A chatty engine prints hundreds of lines a second, each with its own
        write. Reading at most every ``COALESCE_S`` (the pipe holds 64 KiB
        meanwhile) and writing all complete lines at once keeps the keeper's
        CPU small beside the engine's; the agent reads the log at 5 Hz anyway.
        """
        with pipe:
            partial = b""
            while chunk := os.read(pipe.fileno(), READ_BYTES):
                *complete, partial = (partial + chunk).split(b"\n")
                while len(partial) > MAX_LINE_BYTES:  # a runaway line is cut, never held whole
                    complete.append(partial[:MAX_LINE_BYTES])
                    partial = partial[MAX_LINE_BYTES:]
                if complete:
                    self.lines([_text(raw) for raw in complete])
                if len(chunk) < READ_BYTES:
                    time.sleep(COALESCE_S)
            if partial:
                self.lines([_text(partial)])

    def _wait_for_command(self, child: subprocess.Popen) -> tuple[int | None, int | None]:
        """Reap children (orphans land here too) until the command itself ends."""
        while True:
            try:
                reaped, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return None, None
            if reaped == child.pid:
                code = os.waitstatus_to_exitcode(status)
                child.returncode = code  # reaped here; Popen must not wait on it again
                return (None, -code) if code < 0 else (code, None)

    def _on_stop_signal(self, signum, frame) -> None:
        self.stop_requested = True
        # The group got the signal already; descendants that left it have not.
        for proc in _descendants():
            if _pgid(proc.pid) != os.getpgid(0):
                _send(proc, signal.SIGTERM)

    def _stop_descendants(self) -> None:
        """The command has ended: nothing it started may stay behind."""
        if not _descendants():
            return
        for proc in _descendants():
            _send(proc, signal.SIGTERM)
        deadline = time.monotonic() + self.spec.cleanup_grace_s
        while _reap_some() and time.monotonic() < deadline:
            time.sleep(0.05)
        for _ in range(5):  # a process may fork while we kill; sweep until none is left
            left = _descendants()
            if not left:
                break
            for proc in left:
                _send(proc, signal.SIGKILL)
            while _reap_some(block=True):
                pass

    def _record(self, code: int | None, sig: int | None) -> None:
        record = ExitRecord(
            exit_code=code, exit_signal=sig, ended_at=time.time(), stop_requested=self.stop_requested
        )
        write_json(self.rank_dir / EXIT_FILE, record)


def _text(raw: bytes) -> str:
    return raw.rstrip(b"\r").decode("utf-8", errors="replace")


def _descendants() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def _reap_some(block: bool = False) -> bool:
    """Reap what has exited; False once the keeper has no children left."""
    try:
        while True:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
            if pid == 0:
                return True
            if block:
                return True
    except ChildProcessError:
        return False


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _send(proc: psutil.Process, sig: signal.Signals) -> None:
    try:
        proc.send_signal(sig)
    except psutil.Error:
        pass


def serve_spare() -> int:
    """Fork a keeper for each rank directory read from stdin, until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C for the agent's group: the agent closes the pipe
    pending, children = b"", False
    _set_name(SPARE_NAME)  # `ps` tells the spare from keepers; tests wait for it by this name
    os.write(1, b"ready\n")
    while True:
        if select.select([0], [], [], SPARE_REAP_S if children else None)[0]:
            chunk = os.read(0, 4096)
            if not chunk:
                return 0
            pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            os.write(1, _fork_keeper(json.loads(line)).encode() + b"\n")
        children = _reap_ended()


def _fork_keeper(rank_dir: str) -> str:
    """Fork the keeper of ``rank_dir``; its pid, or ``error ...`` when the fork failed."""
    try:
        pid = os.fork()
    except OSError as exc:
        return f"error {exc}"
    if pid == 0:
        _run_forked_keeper(Path(rank_dir))
    return str(pid)


def _run_forked_keeper(rank_dir: Path) -> None:
    """In the forked child: the same start as ``python -m ... keeper RANK_DIR``, then exit."""
    code = 1
    try:
        os.setsid()
        _set_name(os.path.basename(sys.executable))  # named like a keeper started afresh
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        err = os.open(rank_dir / ERR_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(err, 1)
        os.dup2(err, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the spare's pipes to the agent among them
        os.chdir(rank_dir)
        keeper = Keeper(rank_dir)
        code = keeper.run()
        if keeper.handler is not None:
            keeper.handler.close()
    except BaseException:  # noqa: BLE001 - the child must never return into the spare's loop
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def _set_name(name: str) -> None:
    _libc().prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def _reap_ended() -> bool:
    """Collect keepers that have ended; whether some still run (to be collected later)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == SPARE_FLAG:
        return serve_spare()
    if len(args) != 1:
        usage = "usage: python -m sparksync_agent.supervisor.keeper RANK_DIR | --spare WORKLOADS_DIR"
        print(usage, file=sys.stderr)
        return 2
    return Keeper(Path(args[0])).run()


if __name__ == "__main__":
    sys.exit(main())
