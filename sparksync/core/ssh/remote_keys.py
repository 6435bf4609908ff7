"""Apply authorized_keys edits on a node: under a lock, over SFTP, replaced atomically.

Two clients may edit the same account's authorized_keys at once (two
laptops pairing one node). Each edit is a read-modify-write, so it runs
while a shell on the node holds ``flock`` on the ``~/.ssh`` directory; the
kernel drops that lock when the session ends, even if this client dies
mid-edit. The new content goes to a temporary file in the same directory,
with the old file's mode, and is renamed over the old one, so the file is
never seen half-written. ``~/.ssh`` is created with mode 700 if missing; an
existing one keeps its mode.
"""

from __future__ import annotations

import logging
import posixpath
import secrets
import shlex
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import paramiko

from sparksync.core.ssh import authorized_keys
from sparksync.core.ssh.errors import PairingError

log = logging.getLogger(__name__)

SSH_DIR = ".ssh"
AUTHORIZED_KEYS = ".ssh/authorized_keys"
LOCK_WAIT_S = 30

# Holds the lock until we close the channel (cat then sees EOF). Without
# flock (rare: it is in util-linux) the edit runs unlocked; the atomic
# rename still keeps the file whole.
_LOCK_SCRIPT = (
    "umask 077; mkdir -p -m 700 .ssh || exit 3; "
    "if command -v flock >/dev/null 2>&1; then "
    f"exec 9<.ssh && flock -w {LOCK_WAIT_S} 9 || exit 4; echo locked; "
    "else echo unlocked; fi; exec cat >/dev/null"
)


def install_key(transport: paramiko.Transport, key_line: str, where: str) -> bool:
    """Add ``key_line`` to the account's authorized_keys; False when it was already there."""
    return edit_authorized_keys(transport, lambda old: authorized_keys.add_key(old, key_line), where)


def uninstall_key(transport: paramiko.Transport, key_line: str, where: str) -> bool:
    """Remove ``key_line``'s key (and nothing else); False when it was not there."""
    return edit_authorized_keys(transport, lambda old: authorized_keys.remove_key(old, key_line), where)


def read_authorized_keys(transport: paramiko.Transport) -> bytes:
    with _sftp(transport) as sftp:
        try:
            with sftp.open(AUTHORIZED_KEYS, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return b""


def edit_authorized_keys(transport: paramiko.Transport, change: Callable[[bytes], bytes], where: str) -> bool:
    """Replace the file's content with ``change(content)``; True when that changed anything."""
    return edit_ssh_file(transport, AUTHORIZED_KEYS, change, where)


def edit_ssh_file(
    transport: paramiko.Transport, relpath: str, change: Callable[[bytes], bytes], where: str
) -> bool:
    """The same locked, atomic edit for any file under ``~/.ssh`` (``relpath`` from the home)."""
    try:
        with _node_lock(transport, where), _sftp(transport) as sftp:
            return _edit(sftp, change, relpath)
    except (OSError, paramiko.SSHException, EOFError) as exc:
        raise PairingError(
            f"Could not update ~/{relpath} on {where} ({exc or type(exc).__name__}). Check that the "
            "account's home and ~/.ssh belong to it and are writable, then try again."
        ) from exc


def read_ssh_file(transport: paramiko.Transport, relpath: str) -> bytes:
    """A file under ``~/.ssh`` (``b""`` when there is none)."""
    with _sftp(transport) as sftp:
        try:
            with sftp.open(relpath, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return b""


def _edit(sftp: paramiko.SFTPClient, change: Callable[[bytes], bytes], relpath: str = AUTHORIZED_KEYS) -> bool:
    path, old, mode = _current(sftp, relpath)
    new = change(old)
    if new == old:
        return False
    temp = posixpath.join(posixpath.dirname(path), f".{posixpath.basename(path)}.sparksync-{secrets.token_hex(4)}")
    try:
        with sftp.open(temp, "wb") as handle:
            sftp.chmod(temp, mode)
            handle.write(new)
        sftp.posix_rename(temp, path)
    except BaseException:
        _remove_quietly(sftp, temp)
        raise
    log.info("updated %s on the node (%d -> %d bytes)", path, len(old), len(new))
    return True


def _current(sftp: paramiko.SFTPClient, relpath: str = AUTHORIZED_KEYS) -> tuple[str, bytes, int]:
    """The real path (a symlinked file is edited where it lives), content and mode."""
    try:
        path = sftp.normalize(relpath)
        mode = stat.S_IMODE(sftp.stat(path).st_mode or 0o600)  # a server may leave the mode out
    except FileNotFoundError:
        return posixpath.join(sftp.normalize(SSH_DIR), posixpath.basename(relpath)), b"", 0o600
    with sftp.open(path, "rb") as handle:
        return path, handle.read(), mode


def _remove_quietly(sftp: paramiko.SFTPClient, path: str) -> None:
    try:
        sftp.remove(path)
    except (OSError, paramiko.SSHException):
        log.warning("could not remove the temporary file %s on the node", path)


@contextmanager
def _sftp(transport: paramiko.Transport) -> Iterator[paramiko.SFTPClient]:
    sftp = paramiko.SFTPClient.from_transport(transport)
    if sftp is None:
        raise paramiko.SSHException("the node refused the SFTP subsystem")
    try:
        yield sftp
    finally:
        sftp.close()


@contextmanager
def _node_lock(transport: paramiko.Transport, where: str) -> Iterator[None]:
    channel = transport.open_session(timeout=LOCK_WAIT_S)
    try:
        channel.settimeout(LOCK_WAIT_S + 5)
        channel.exec_command(shlex.join(["sh", "-c", _LOCK_SCRIPT]))
        answer = _lock_answer(channel)
        if answer == "unlocked":
            log.warning("%s has no flock; editing authorized_keys without a lock", where)
        elif answer != "locked":
            raise PairingError(_lock_failure(channel, where))
        yield
    finally:
        channel.close()  # EOF for cat: the shell exits and the lock goes with it


def _lock_answer(channel: paramiko.Channel) -> str | None:
    """ "locked" or "unlocked"; None when the script ended without either.

    Lines before it are skipped: a login shell's rc file may print something.
    """
    line = bytearray()
    while True:
        chunk = channel.recv(1)
        if not chunk:
            return None
        if chunk != b"\n":
            line += chunk
            continue
        word = line.strip().decode(errors="replace")
        if word in ("locked", "unlocked"):
            return word
        line.clear()


def _lock_failure(channel: paramiko.Channel, where: str) -> str:
    status = channel.recv_exit_status()
    why = {3: "could not create ~/.ssh", 4: f"~/.ssh stayed locked by another edit for {LOCK_WAIT_S} s"}
    reason = why.get(status, f"the lock command failed (exit status {status})")
    return f"Could not update ~/{AUTHORIZED_KEYS} on {where}: {reason}. Try again."
