"""rsync as both sides run it: the argv of a model copy and the reading of its progress.

Shared by the agent (a push from one node to another over the node-to-node
SSH) and the client (a copy relayed through this computer), so both resume
and report the same way. ``--partial`` keeps a cut file so the next run
sends only what is missing; ``--info=progress2`` reports the whole transfer,
not each file.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

RSYNC = "rsync"

# "    12,345,678  45%   10.52MB/s    0:00:12 (xfr#3, to-chk=2/7)"
_PROGRESS = re.compile(rb"^\s*([\d,]+)\s+(\d+)%\s+\S+\s+\d+:\d\d:\d\d")
_LITERAL = re.compile(rb"^Literal data: ([\d,]+) bytes")


def rsync_argv(
    source: str,
    dest: str,
    *,
    rsh: list[str] | None = None,
    checksum: bool = False,
    files_from: bool = True,
) -> list[str]:
    """rsync of the files listed on stdin (``--files-from=-``) from ``source/`` into ``dest/``.

    ``-L`` copies what a Hugging Face cache's symlinks point at; ``-t`` keeps
    mtimes, so a re-run skips what is already there; ``--checksum`` compares
    contents instead (a repair of a file whose size and mtime look right).
    """
    argv = [RSYNC, "-rLt", "--partial", "--info=progress2", "--no-inc-recursive", "--stats", "--chmod=u+rw"]
    if checksum:
        argv.append("--checksum")
    if rsh is not None:
        argv += ["-e", " ".join(_quote(part) for part in rsh)]
    if files_from:
        argv += ["--files-from=-", "--from0"]
    return [*argv, source.rstrip("/") + "/", dest.rstrip("/") + "/"]


def ssh_command(
    port: int,
    identity_file: str | None = None,
    known_hosts: str | None = None,
    timeout_s: int = 10,
    control_dir: Path | None = None,
) -> list[str]:
    """ssh for a node-to-node copy: keys only, never a prompt, never a host key accepted unseen.

    With ``control_dir``, the first ssh to a host (the route's reach check) stays
    up for ``CONTROL_PERSIST_S`` as a master that the copy's rsync then rides on,
    so a copy pays one key exchange, not two. The socket lives in a folder only
    the agent's user can enter; a path too long for a socket goes without.
    """
    argv = [
        "ssh", "-p", str(port), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
        "-o", f"ConnectTimeout={timeout_s}", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
    ]  # fmt: skip
    if identity_file:
        argv += ["-i", identity_file, "-o", "IdentitiesOnly=yes"]
    if known_hosts:
        argv += ["-o", f"UserKnownHostsFile={known_hosts}"]
    folder = _control_folder(control_dir) if control_dir is not None else None
    if folder is not None:
        argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={folder}/%C",
                 "-o", f"ControlPersist={CONTROL_PERSIST_S}"]  # fmt: skip
    return argv


CONTROL_PERSIST_S = 30
# sun_path holds 107 bytes on Linux; %C expands to 40 hex digits, and ssh binds the socket under
# that name plus a 17-byte temporary suffix first (a longer path is a fatal error to ssh).
_SOCKET_PATH_MAX = 107


def _control_folder(control_dir: Path) -> Path | None:
    if len(os.fsencode(control_dir)) + 1 + 40 + 17 > _SOCKET_PATH_MAX:
        return None
    try:
        control_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        control_dir.chmod(0o700)
    except OSError:
        return None
    return control_dir


@dataclass
class RsyncProgress:
    """What rsync's output said so far."""

    bytes_done: int = 0
    percent: int = 0
    literal_bytes: int | None = None

    def feed(self, line: bytes) -> bool:
        """Read one line (rsync ends progress lines with CR); True when the progress moved."""
        match = _PROGRESS.match(line)
        if match:
            self.bytes_done = int(match.group(1).replace(b",", b""))
            self.percent = int(match.group(2))
            return True
        literal = _LITERAL.match(line.strip())
        if literal:
            self.literal_bytes = int(literal.group(1).replace(b",", b""))
        return False


def split_output(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines (ended by CR or LF) and the rest still to come."""
    parts = re.split(rb"[\r\n]", buffer)
    return parts[:-1], parts[-1]


@dataclass
class RsyncOutcome:
    returncode: int
    progress: RsyncProgress
    stderr_tail: str  # its last lines, for the error a failed run reports


def run_rsync(
    argv: list[str],
    files: list[str],
    on_progress: Callable[[RsyncProgress], None],
    on_start: Callable[[subprocess.Popen], None] = lambda _proc: None,
) -> RsyncOutcome:
    """Run rsync over ``files`` (NUL-separated on its stdin, ``--from0 --files-from=-``) to its end.

    ``on_progress`` hears each move of the progress; ``on_start`` gets the
    process (in its own session), so a caller can stop it. Raises
    FileNotFoundError when rsync is not installed.
    """
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stderr = proc.stderr
    errors: list[bytes] = []
    # stderr is read beside stdout, so a chatty rsync never blocks on a full pipe.
    reader = threading.Thread(target=lambda: errors.append(stderr.read()), daemon=True)
    reader.start()
    on_start(proc)
    proc.stdin.write(b"\0".join(f.encode() for f in files))
    proc.stdin.close()
    progress, rest = RsyncProgress(), b""
    while chunk := os.read(proc.stdout.fileno(), 65536):
        lines, rest = split_output(rest + chunk)
        if any([progress.feed(line) for line in lines]):  # a list: every line is read
            on_progress(progress)
    rc = proc.wait()
    reader.join(5)
    tail = b"".join(errors).decode(errors="replace").strip().splitlines()[-3:]
    return RsyncOutcome(rc, progress, " ".join(tail))


def _quote(part: str) -> str:
    # rsync splits -e on whitespace and honours quotes; paths with spaces must be quoted.
    return part if re.fullmatch(r"[A-Za-z0-9_./=:@%+-]+", part) else "'" + part.replace("'", "'\\''") + "'"
