"""The chat's errors: one per meaning, each saying what happened and what to do next."""

from __future__ import annotations

from sparksync.core.base.errors import SparkSyncError


class ChatError(SparkSyncError):
    """A chat answer could not be had: the engine is gone, its tunnel is down, or it refused."""
