"""Errors discovery can raise; each says what happened and what to do next."""

from __future__ import annotations

from sparksync.core.base.errors import SparkSyncError


class DiscoveryError(SparkSyncError):
    """mDNS browsing could not start or run."""

    exit_code = 8


class InterfaceError(DiscoveryError):
    """An interface address given for browsing is not usable here."""

    exit_code = 2


class HostNotFoundError(DiscoveryError):
    """A host name typed by the user does not resolve."""


class ScanRefusedError(DiscoveryError):
    """A unicast scan target is too large or not a unicast address."""

    exit_code = 2
