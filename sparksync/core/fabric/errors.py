"""Errors the fabric layer raises on purpose; each says what happened and what to do."""

from __future__ import annotations

from sparksync.core.base.errors import SparkSyncError


class FabricSetupError(SparkSyncError):
    """Base of the fabric layer's errors."""

    exit_code = 2


class FabricPlanError(FabricSetupError):
    """The cabling cannot be planned as it is (mixed or broken), or the plan's settings are wrong."""


class SubnetClashError(FabricPlanError):
    """A planned subnet overlaps a network a node already uses; names both."""

    def __init__(self, message: str, *, subnet: str, node: str):
        super().__init__(message)
        self.subnet = subnet
        self.node = node


class FabricStoreError(FabricSetupError):
    """The stored fabric plan cannot be read or written."""


class SudoRefusedError(FabricSetupError):
    """sudo on a node refused the password (or is not allowed for the user)."""


class FabricApplyError(FabricSetupError):
    """Applying (or rolling back) the plan failed on a node; every node was put back as it was."""

    exit_code = 45
