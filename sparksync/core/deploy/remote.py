"""Commands, file reads and uploads on one node, over its SSH transport, with a cancel switch.

Every path given here is relative to the node user's home: sshd starts
commands there and the SFTP server starts there too (see ``layout``).

Cancelling (the ``cancel`` Event) stops what runs now: an upload stops at
its next chunk, and a long command (venv, pip) is killed with its whole
process group, since it runs under ``setsid`` and tells us its pid first.
Cleanup after a cancel must still reach the node, so it runs inside
``uncancellable()``.
"""

from __future__ import annotations

import logging
import secrets
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import paramiko

from sparksync.core.deploy.errors import DeployCancelled, DeployError, UploadError
from sparksync.core.ssh.connection import CommandResult, run
from sparksync.core.ssh.errors import SshError

log = logging.getLogger(__name__)

DEFAULT_COMMAND_TIMEOUT_S = 30.0
_POLL_S = 0.05
_KILL_GRACE_S = 5.0
# Prints its own pid (the new session's and process group's id), then becomes the command.
_KILLABLE = 'echo "$$"; exec "$@"'
# Wait up to ~5 s for process group $1 to be empty, then SIGKILL what is left. `env kill`: the
# procps binary, since shells' built-in kill differ on "--" and negative pids.
_AWAIT_GROUP = (
    'for i in $(seq 50); do env kill -0 -- "-$1" 2>/dev/null || exit 0; sleep 0.1; done; '
    'env kill -KILL -- "-$1" 2>/dev/null; exit 0'
)

UploadProgress = Callable[[int, int], None]  # (bytes sent, total)


class RemoteNode:
    """One node reached through ``transport``; close it to release its SFTP session."""

    def __init__(
        self,
        transport: paramiko.Transport,
        name: str,
        cancel: threading.Event | None = None,
        command_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S,
    ):
        self.transport = transport
        self.name = name
        self.cancel = cancel or threading.Event()
        self.command_timeout_s = command_timeout_s
        self._sftp: paramiko.SFTPClient | None = None
        self._shielded = 0

    def close(self) -> None:
        if self._sftp is not None:
            self._sftp.close()
            self._sftp = None

    def __enter__(self) -> RemoteNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- cancel -------------------------------------------------------------------------------

    @contextmanager
    def uncancellable(self) -> Iterator[None]:
        """Cleanup and rollback run to the end even when the deploy was cancelled."""
        self._shielded += 1
        try:
            yield
        finally:
            self._shielded -= 1

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set() and not self._shielded

    def pause(self, seconds: float) -> None:
        """Wait ``seconds``, or less when a cancel comes that is not shielded."""
        if self.cancel.is_set():
            if not self._shielded:
                return
            time.sleep(seconds)  # cleanup after a cancel: the Event would not wait at all
        else:
            self.cancel.wait(seconds)

    def check_cancel(self, doing: str) -> None:
        if self.cancelled:
            raise DeployCancelled(f"cancelled while {doing}")

    # --- commands -----------------------------------------------------------------------------

    def run(self, argv: list[str], timeout: float | None = None, stdin: bytes | None = None) -> CommandResult:
        """A short command, run to the end."""
        self.check_cancel(f"about to run {argv[0]}")
        return run(self.transport, argv, timeout or self.command_timeout_s, stdin)

    def sh(self, script: str, *args: str, timeout: float | None = None) -> CommandResult:
        """``sh -c script`` with ``args`` as $1, $2...: no quoting of paths inside the script."""
        return self.run(["sh", "-c", script, "sh", *args], timeout)

    def check_sh(self, script: str, *args: str, doing: str, timeout: float | None = None) -> str:
        """Like ``sh``, raising DeployError (with the command's own words) when it fails."""
        result = self.sh(script, *args, timeout=timeout)
        if result.exit_status != 0:
            raise DeployError(f"{doing} failed on {self.name}: {failure_text(result)}")
        return result.stdout.decode(errors="replace")

    def run_killable(self, argv: list[str], timeout: float, doing: str) -> CommandResult:
        """A long command in its own process group, killed with its children on cancel or timeout."""
        self.check_cancel(doing)
        channel = self.transport.open_session(timeout=self.command_timeout_s)
        try:
            channel.exec_command(shlex.join(["setsid", "-w", "sh", "-c", _KILLABLE, "sh", *argv]))
            channel.shutdown_write()
            return self._follow(channel, timeout, doing)
        finally:
            channel.close()

    def _follow(self, channel: paramiko.Channel, timeout: float, doing: str) -> CommandResult:
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        while not (channel.exit_status_ready() and channel.eof_received):
            if channel.recv_ready():
                out += channel.recv(65536)
            elif channel.recv_stderr_ready():
                err += channel.recv_stderr(65536)
            elif self.cancelled or time.monotonic() > deadline:
                self._kill_group(out, channel)
                if self.cancelled:
                    raise DeployCancelled(f"cancelled while {doing}")
                raise DeployError(f"{doing} on {self.name} took longer than {timeout:g} s and was stopped")
            else:
                self.pause(_POLL_S)
        while channel.recv_stderr_ready():
            err += channel.recv_stderr(65536)
        _pid_line, _, rest = bytes(out).partition(b"\n")
        return CommandResult(channel.recv_exit_status(), rest, bytes(err))

    def _kill_group(self, out: bytearray, channel: paramiko.Channel) -> None:
        pid = bytes(out).partition(b"\n")[0].strip()
        if not pid.isdigit():
            return  # it had not even started
        for signal_name in ("TERM", "KILL"):
            run(self.transport, ["env", "kill", f"-{signal_name}", "--", f"-{pid.decode()}"], self.command_timeout_s)
            deadline = time.monotonic() + _KILL_GRACE_S
            while not channel.exit_status_ready() and time.monotonic() < deadline:
                time.sleep(_POLL_S)
            if channel.exit_status_ready():
                break
        else:
            log.warning("%s: process group %s did not end after SIGKILL", self.name, pid.decode())
        # The command's own exit is not the group's: a child it started (ensurepip, pip) may still
        # be dying and writing. Cleanup must not start until the whole group is gone, or the
        # child recreates what cleanup removed.
        run(self.transport, ["sh", "-c", _AWAIT_GROUP, "sh", pid.decode()], self.command_timeout_s)

    # --- files --------------------------------------------------------------------------------

    def sftp(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            try:
                self._sftp = paramiko.SFTPClient.from_transport(self.transport)
                if self._sftp is None:
                    raise paramiko.SSHException("no SFTP channel")
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise SshError(
                    f"{self.name} refused an SFTP session ({exc}); check its sshd's Subsystem sftp line"
                ) from exc
        return self._sftp

    def read_file(self, path: str, limit: int = 1 << 20) -> bytes | None:
        """The file's bytes (at most ``limit``), or None when it does not exist."""
        try:
            with self.sftp().open(path, "rb") as fh:
                return fh.read(limit)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if getattr(exc, "errno", None) == 2:
                return None
            raise

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Replace ``path`` atomically: a temporary file in the same folder, then a rename."""
        tmp = _temp_name(path)
        sftp = self.sftp()
        try:
            with sftp.open(tmp, "wb") as fh:
                fh.write(data)
            sftp.chmod(tmp, mode)
            sftp.posix_rename(tmp, path)
        except BaseException:
            self._remove_quietly(tmp)
            raise

    def upload(self, local: Path, remote: str, progress: UploadProgress | None = None) -> None:
        """Copy ``local`` to ``remote`` atomically; a failed or cancelled copy leaves nothing behind."""
        tmp = _temp_name(remote)
        size = local.stat().st_size

        def step(sent: int, total: int) -> None:
            if progress is not None:
                progress(sent, total)
            self.check_cancel("uploading the bundle")

        try:
            with local.open("rb") as fh:
                self.sftp().putfo(fh, tmp, file_size=size, callback=step, confirm=True)
            self.sftp().posix_rename(tmp, remote)
        except DeployCancelled:
            self._remove_quietly(tmp)
            raise
        except (OSError, paramiko.SSHException, EOFError) as exc:
            self._remove_quietly(tmp)
            raise UploadError(
                f"copying {local.name} to {self.name} failed ({exc or type(exc).__name__})"
            ) from exc

    def _remove_quietly(self, path: str) -> None:
        try:
            self.sftp().remove(path)
        except (OSError, paramiko.SSHException, EOFError):
            pass  # never made, or the link is gone; a later deploy removes leftovers


def failure_text(result: CommandResult, lines: int = 3) -> str:
    """The last lines a failed command wrote, for an error message."""
    text = (result.stderr or result.stdout).decode(errors="replace").splitlines()
    kept = [line.strip() for line in text if line.strip()]
    return " / ".join(kept[-lines:]) or f"exit status {result.exit_status}"


def _temp_name(path: str) -> str:
    head, _, name = path.rpartition("/")
    return f"{head + '/' if head else ''}.{name}.{secrets.token_hex(4)}.part"
