"""Waiting for an agent's first sample: a freshly started agent may not hold one yet."""

from __future__ import annotations

import threading
import time

from sparksync_agent.protocol import Snapshot

from sparksync.core.agents.client import AgentClient
from sparksync.core.base.errors import SparkSyncError


class NoSampleError(SparkSyncError):
    exit_code = 7


def wait_first_sample(client: AgentClient, timeout: float, cancel: threading.Event | None = None) -> Snapshot:
    """The node's snapshot once it holds a sample; NoSampleError after ``timeout``."""
    deadline = time.monotonic() + timeout
    stop = cancel or threading.Event()
    while True:
        snapshot = client.snapshot()
        if snapshot.latest is not None:
            return snapshot
        if time.monotonic() > deadline or stop.is_set():
            raise NoSampleError(
                f"the agent at {client.base_url} took no sample within {timeout:g} s. "
                "Check its collectors with the agent's status, or raise --timeout."
            )
        stop.wait(min(0.1, 1.0 / max(snapshot.sample_hz, 1.0)))
