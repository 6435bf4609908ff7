"""Errors of the SSH layer; each says what happened and what to do next.

No message ever holds a password, a passphrase or a private key.
"""

from __future__ import annotations

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.nodes.registry import HostKeyChangedError as RegistryHostKeyChangedError


class SshError(SparkSyncError):
    """Base of the SSH layer's errors."""

    exit_code = 10


class HostUnreachableError(SshError):
    """No TCP connection to the node's SSH port: timeout, no route or refused."""

    exit_code = 11


class SshHandshakeError(SshError):
    """Something answered, but the SSH handshake with it failed."""

    exit_code = 11


class AuthenticationFailedError(SshError):
    """The node refused our password or our key."""

    exit_code = 12


class HostKeyError(SshError):
    """Base of the errors about a node's host key."""

    exit_code = 13


class HostKeyChangedError(HostKeyError, RegistryHostKeyChangedError):
    """A paired node presented a host key other than the pinned one."""

    exit_code = 13


class HostKeyMismatchError(HostKeyError):
    """The host key differs from the one the node advertised over mDNS: a possible impostor."""


class HostKeyNotAcceptedError(HostKeyError):
    """The user (or --accept-host-key) did not accept the key the node presented."""


class PairingError(SshError):
    """Pairing could not be completed; whatever it had changed was undone."""

    exit_code = 14


class PairingBusyError(PairingError):
    """Another SparkSync process on this computer is pairing the same node right now."""


class UnpairError(SshError):
    """Unpairing could not reach or change the node; nothing was changed."""

    exit_code = 14


class NodeOfflineError(SshError):
    """A paired node's transport is down and did not come back in time."""

    exit_code = 11


class TunnelError(SshError):
    """A local port forward could not be opened."""

    exit_code = 15
