"""rsync's remote shell when this computer copies to or from a node: SparkSync's own SSH.

rsync runs ``python -m sparksync.core.models.rsh NODE_ID rsync --server ...``.
This program connects to the paired node with this computer's key (its
passphrase from the keyring) and the node's pinned host key, exactly as
every other SparkSync connection does, runs the command there and pipes
stdin, stdout and stderr. OpenSSH cannot read the keyring, and a copy of the
key without its passphrase is what SparkSync refuses to keep, hence this.
"""

from __future__ import annotations

import os
import sys
import threading

from sparksync.core.base.errors import SparkSyncError

WINDOW = 1 << 27  # a large SSH window: a copy is bound by the link, not by acknowledgements
CHUNK = 1 << 16


def command() -> list[str]:
    """The rsh argv rsync is given (``-e``)."""
    return [sys.executable, "-m", "sparksync.core.models.rsh"]


def main(argv: list[str]) -> int:
    args = list(argv)
    if len(args) >= 2 and args[0] == "-l":
        args = args[2:]  # the user is the registry's, whatever rsync says
    if len(args) < 2:
        print("usage: python -m sparksync.core.models.rsh NODE_ID COMMAND...", file=sys.stderr)
        return 2
    node_id, remote = args[0], " ".join(args[1:])
    for fd in (0, 1, 2):
        os.set_blocking(fd, True)  # rsync may hand us non-blocking pipes; we write whole chunks
    try:
        transport = _connect(node_id)
    except SparkSyncError as exc:
        print(f"sparksync: {exc}", file=sys.stderr)
        return 255
    try:
        channel = transport.open_session(window_size=WINDOW, max_packet_size=1 << 15)
        channel.exec_command(remote)
        feeder = threading.Thread(target=_feed, args=(channel,), daemon=True)
        feeder.start()
        errors = threading.Thread(target=_copy_stderr, args=(channel,), daemon=True)
        errors.start()
        out = sys.stdout.fileno()
        while True:
            data = channel.recv(CHUNK)
            if not data:
                break
            _write_all(out, data)
        errors.join(5)
        return channel.recv_exit_status()
    finally:
        transport.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _feed(channel) -> None:
    source = sys.stdin.fileno()
    try:
        while True:
            data = os.read(source, CHUNK)
            if not data:
                break
            channel.sendall(data)
    except OSError:
        pass
    finally:
        try:
            channel.shutdown_write()
        except OSError:
            pass


def _copy_stderr(channel) -> None:
    while True:
        data = channel.recv_stderr(CHUNK)
        if not data:
            return
        _write_all(sys.stderr.fileno(), data)


def _connect(node_id: str):
    from sparksync.core.nodes.registry import Registry
    from sparksync.core.ssh.client_key import ClientKey
    from sparksync.core.ssh.connection import Endpoint, SshSettings, connect_with_key, default_dialer
    from sparksync.core.ssh.secrets import SecretStore

    node = Registry().get_by_id(node_id)
    key = ClientKey.load_or_create(SecretStore())
    endpoint = Endpoint(node.host, node.port, node.user, node.name)
    return connect_with_key(endpoint, node.host_key, key.pkey, default_dialer, SshSettings())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
