"""Switchyard's errors: each says what happened and what to do next."""

from __future__ import annotations

from sparksync.core.base.errors import SparkSyncError


class SwitchyardError(SparkSyncError):
    """Base of every error Switchyard raises on purpose."""

    exit_code = 20


class ConfigError(SwitchyardError):
    """The config file is missing, unreadable or invalid."""

    exit_code = 21


class InsecureBindError(SwitchyardError):
    """Asked to listen beyond loopback without an API key."""

    exit_code = 22


class CaseFileError(SwitchyardError):
    """An eval case file is missing, unreadable or invalid."""

    exit_code = 23


class EvalError(SwitchyardError):
    """An eval run could not be carried out (e.g. a target answered nothing)."""

    exit_code = 24


class EvalNotFoundError(SwitchyardError):
    """No stored eval has the id asked for."""

    exit_code = 25
