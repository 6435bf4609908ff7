"""One SSH connection: dial, handshake, check the host key, authenticate, run commands.

Built on ``paramiko.Transport`` rather than ``SSHClient`` because we need to
choose the socket (the ``Dialer``: tests dial from inside a network
namespace), to make the server present the pinned key type first, and to
keep a transport open for channels, SFTP and tunnels.

Every failure becomes one of the errors in ``errors.py`` with a message a
user can act on: unresolvable name, unreachable host (timeout, no route,
refused), not an SSH server, wrong password or key.
"""

from __future__ import annotations

import errno
import logging
import shlex
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import paramiko

from sparksync.core.discovery.manual import resolve_host
from sparksync.core.nodes.registry import PinnedHostKey
from sparksync.core.ssh.errors import (
    AuthenticationFailedError,
    HostUnreachableError,
    SshError,
    SshHandshakeError,
)
from sparksync.core.ssh.hostkeys import PinnedHostKeyPolicy, fingerprint, preferred_key_types

log = logging.getLogger(__name__)

# (host, port, timeout_s) -> a connected TCP socket. Raises HostNotFoundError
# (discovery) or HostUnreachableError.
Dialer = Callable[[str, int, float], socket.socket]
_MIN_STEP_S = 0.05
# What a command keeps of its --timeout for itself after the nodes' waits end:
# saving their states, printing, closing links and leaving the interpreter.
COMMAND_RESERVE_S = 0.25


@dataclass(frozen=True)
class SshSettings:
    connect_timeout_s: float = 10.0
    handshake_timeout_s: float = 15.0  # banner and key exchange
    auth_timeout_s: float = 20.0
    command_timeout_s: float = 30.0
    keepalive_s: float = 5.0  # an SSH keepalive after this long without traffic
    # The kernel drops a connection whose sent data (our keepalives) stays
    # unacknowledged this long, so a cut link is noticed in about
    # keepalive_s + dead_after_s instead of TCP's default of ~15 minutes.
    dead_after_s: float = 15.0
    # time.monotonic() by which every connect must be over (a command's --timeout): each step's
    # limit above shrinks to the time left, so a link that hangs cannot outlast the command.
    deadline: float | None = None

    @classmethod
    def for_command(cls, timeout_s: float, **limits: float) -> SshSettings:
        """Settings whose every connect ends within ``timeout_s`` from now."""
        return cls(deadline=time.monotonic() + timeout_s, **limits)

    def within(self, seconds: float) -> float:
        """``seconds``, or less when the deadline comes sooner (never 0: a socket would block)."""
        if self.deadline is None:
            return seconds
        return max(_MIN_STEP_S, min(seconds, self.deadline - time.monotonic()))


def node_wait_budget(command_timeout_s: float) -> float:
    """How long a command with ``--timeout command_timeout_s`` may wait for its nodes and connects."""
    return max(_MIN_STEP_S, command_timeout_s - min(COMMAND_RESERVE_S, command_timeout_s / 4))


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    user: str
    name: str  # the node's name, or the host while pairing

    @property
    def where(self) -> str:
        return f"{self.user}@{self.host}" + (f":{self.port}" if self.port != 22 else "")


def default_dialer(host: str, port: int, timeout: float) -> socket.socket:
    """Resolve ``host`` (mDNS for ``.local``, else the system resolver) and connect to the first address that answers."""
    addresses = resolve_host(host, port).addresses
    failures: list[tuple[str, OSError]] = []
    for address in addresses:
        try:
            return socket.create_connection((address, port), timeout=timeout)
        except OSError as exc:
            failures.append((address, exc))
    raise HostUnreachableError(unreachable_message(host, port, failures, timeout))


def unreachable_message(host: str, port: int, failures: list[tuple[str, OSError]], timeout: float) -> str:
    if not failures:
        return f"{host} resolved to no address; type the node's IP address instead."
    reasons = "; ".join(f"{address}: {_why(exc, timeout)}" for address, exc in failures)
    last = failures[-1][1]
    if isinstance(last, ConnectionRefusedError):
        hint = "the machine is up but no SSH server listens on that port; start sshd on the node, or give the right port"
    else:
        hint = "check that the node is on, on this network and not behind a firewall, then try again"
    return f"Cannot reach {host} on SSH port {port} ({reasons}): {hint}."


def _why(exc: OSError, timeout: float) -> str:
    if isinstance(exc, TimeoutError) and exc.errno in (None, errno.ETIMEDOUT):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return "no route to host"
    return exc.strerror or str(exc)


# --- opening a transport -----------------------------------------------------------------------


def handshake(
    endpoint: Endpoint, dialer: Dialer, settings: SshSettings, prefer: Iterable[str] = ()
) -> paramiko.Transport:
    """A transport with the key exchange done (the host key known) but not authenticated."""
    sock = _tune_socket(dialer(endpoint.host, endpoint.port, settings.within(settings.connect_timeout_s)), settings)
    transport = paramiko.Transport(sock)
    try:
        transport.banner_timeout = settings.within(settings.handshake_timeout_s)
        transport.auth_timeout = settings.within(settings.auth_timeout_s)
        options = transport.get_security_options()
        options.key_types = preferred_key_types(options.key_types, prefer)
        transport.start_client(timeout=settings.within(settings.handshake_timeout_s))
    except BaseException as exc:
        transport.close()
        if isinstance(exc, (paramiko.SSHException, EOFError, OSError)):
            raise SshHandshakeError(_handshake_message(endpoint, exc)) from exc
        raise
    return transport


def _tune_socket(sock: socket.socket, settings: SshSettings) -> socket.socket:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if hasattr(socket, "TCP_USER_TIMEOUT"):  # Linux
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(settings.dead_after_s * 1000))
    if type(sock) is socket.socket and hasattr(socket, "TCP_QUICKACK"):
        return _QuickAckSocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
    return sock


class _QuickAckSocket(socket.socket):
    """Acknowledges what it receives at once instead of up to 40 ms later.

    sshd leaves Nagle on for sessions without a terminal, so it holds back a
    small packet (a channel's EOF, the second half of a reply) until we ACK
    the one before; Linux delays that ACK when we are not sending. Setting
    TCP_QUICKACK after each read sends the pending ACK immediately (it is not
    sticky, hence every time). Measured in the lab: a small HTTP/1.0 exchange
    over one channel (reply, then EOF) took ~45 ms without it, ~1-4 ms with it.
    """

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data = super().recv(bufsize, flags)
        if data:
            self.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        return data


def _handshake_message(endpoint: Endpoint, exc: BaseException) -> str:
    detail = str(exc) or type(exc).__name__
    return (
        f"The SSH handshake with {endpoint.host} port {endpoint.port} failed ({detail}). Check that "
        "this address and port belong to the node's SSH server, then try again."
    )


def probe_host_key(
    endpoint: Endpoint, dialer: Dialer, settings: SshSettings, prefer: Iterable[str] = ()
) -> paramiko.PKey:
    """The host key the node presents, read without logging in (nothing changes on the node)."""
    transport = handshake(endpoint, dialer, settings, prefer)
    try:
        return transport.get_remote_server_key()
    finally:
        transport.close()


def connect_with_key(
    endpoint: Endpoint, pinned: PinnedHostKey, pkey: paramiko.PKey, dialer: Dialer, settings: SshSettings
) -> paramiko.Transport:
    """A transport to a paired node, checked against its pinned key and logged in with ``pkey``."""
    transport = _checked(endpoint, pinned, dialer, settings)
    try:
        _auth_key(transport, endpoint, pkey)
    except BaseException:
        transport.close()
        raise
    return transport


def connect_with_password(
    endpoint: Endpoint, pinned: PinnedHostKey, password: str, dialer: Dialer, settings: SshSettings
) -> paramiko.Transport:
    """A transport logged in with ``password``, to a node presenting exactly ``pinned``.

    The password is only passed on to paramiko; it is never stored or logged here.
    """
    transport = _checked(endpoint, pinned, dialer, settings)
    try:
        _auth_password(transport, endpoint, password)
    except BaseException:
        transport.close()
        raise
    return transport


def _checked(
    endpoint: Endpoint, pinned: PinnedHostKey, dialer: Dialer, settings: SshSettings
) -> paramiko.Transport:
    transport = handshake(endpoint, dialer, settings, prefer=[pinned.key_type])
    try:
        PinnedHostKeyPolicy(pinned, endpoint.name, endpoint.host).check(transport.get_remote_server_key())
    except BaseException:
        transport.close()
        raise
    return transport


def _auth_key(transport: paramiko.Transport, endpoint: Endpoint, pkey: paramiko.PKey) -> None:
    try:
        transport.auth_publickey(endpoint.user, pkey)
    except paramiko.AuthenticationException as exc:
        raise AuthenticationFailedError(
            f"{endpoint.where} refused this computer's SparkSync key ({fingerprint(pkey)}). The key may "
            "have been removed from the node's ~/.ssh/authorized_keys. Pair the node again to "
            f"reinstall it: `sparksync node pair {endpoint.host} --user {endpoint.user} --repair`."
        ) from exc
    except (paramiko.SSHException, EOFError, OSError) as exc:
        raise SshError(
            f"Logging in to {endpoint.where} failed ({exc or type(exc).__name__}); try again."
        ) from exc


def _auth_password(transport: paramiko.Transport, endpoint: Endpoint, password: str) -> None:
    try:
        try:
            transport.auth_password(endpoint.user, password)
        except paramiko.BadAuthenticationType as exc:
            # Some servers take the password only as a keyboard-interactive answer.
            if "keyboard-interactive" not in exc.allowed_types:
                raise
            transport.auth_interactive(endpoint.user, _password_answers(password))
    except paramiko.BadAuthenticationType as exc:
        raise AuthenticationFailedError(
            f"{endpoint.where} does not accept password logins (it allows: {', '.join(exc.allowed_types)}). "
            "Enable PasswordAuthentication on the node for pairing, or install this computer's key "
            "(sparksync's id_ed25519.pub) there yourself."
        ) from exc
    except paramiko.AuthenticationException as exc:
        raise AuthenticationFailedError(
            f"{endpoint.where} refused the password (wrong password, or user {endpoint.user!r} may not log "
            "in over SSH). Nothing was changed on the node. Check the user name and password, then pair again."
        ) from exc
    except (paramiko.SSHException, EOFError, OSError) as exc:
        raise SshError(
            f"Logging in to {endpoint.where} failed ({exc or type(exc).__name__}); try again."
        ) from exc


def _password_answers(password: str):
    def answer(title: str, instructions: str, prompts: list[tuple[str, bool]]) -> list[str]:
        # Hidden prompts ask for the password; we have nothing to say to visible ones.
        return [password if not echo else "" for _prompt, echo in prompts]

    return answer


# --- commands ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandResult:
    exit_status: int
    stdout: bytes
    stderr: bytes


def run(
    transport: paramiko.Transport, argv: list[str], timeout: float, stdin: bytes | None = None
) -> CommandResult:
    """Run ``argv`` (quoted for the remote shell) to completion and collect its output."""
    channel = transport.open_session(timeout=timeout)
    try:
        channel.settimeout(timeout)
        channel.exec_command(shlex.join(argv))
        if stdin is not None:
            channel.sendall(stdin)
        channel.shutdown_write()
        stdout, stderr = _drain(channel)
        return CommandResult(channel.recv_exit_status(), stdout, stderr)
    except TimeoutError as exc:
        raise SshError(
            f"{shlex.join(argv)!r} on the node gave no answer within {timeout:g} s; try again."
        ) from exc
    finally:
        channel.close()


def _drain(channel: paramiko.Channel) -> tuple[bytes, bytes]:
    # stdout to EOF, then stderr: fine for the short outputs of our commands. A
    # command writing more than a channel window (2 MiB) to stderr first would
    # stall; read both with select() if one ever does.
    stdout, stderr = bytearray(), bytearray()
    while True:
        chunk = channel.recv(65536)
        if not chunk:
            break
        stdout += chunk
    while True:
        chunk = channel.recv_stderr(65536)
        if not chunk:
            break
        stderr += chunk
    return bytes(stdout), bytes(stderr)
