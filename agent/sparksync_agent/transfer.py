"""rsync as both sides run it: the argv of a model copy and the reading of its progress.

Shared by the agent (a push from one node to another over the node-to-node
SSH) and the client (a copy relayed through this computer), so both resume
and report the same way. ``--partial`` keeps a cut file so the next run
sends only what is missing; ``--info=progress2`` reports the whole transfer,
not each file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    port: int, identity_file: str | None = None, known_hosts: str | None = None, timeout_s: int = 10
) -> list[str]:
    """ssh for a node-to-node copy: keys only, never a prompt, never a host key accepted unseen."""
    argv = [
        "ssh", "-p", str(port), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
        "-o", f"ConnectTimeout={timeout_s}", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
    ]  # fmt: skip
    if identity_file:
        argv += ["-i", identity_file, "-o", "IdentitiesOnly=yes"]
    if known_hosts:
        argv += ["-o", f"UserKnownHostsFile={known_hosts}"]
    return argv


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


def _quote(part: str) -> str:
    # rsync splits -e on whitespace and honours quotes; paths with spaces must be quoted.
    return part if re.fullmatch(r"[A-Za-z0-9_./=:@%+-]+", part) else "'" + part.replace("'", "'\\''") + "'"
