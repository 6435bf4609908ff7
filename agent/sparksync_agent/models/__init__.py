"""Models on this node: roots, listing with cached manifests, copies received and verified, jobs."""

from __future__ import annotations

from sparksync_agent.models.errors import ModelError
from sparksync_agent.models.jobs import JobBoard
from sparksync_agent.models.store import ModelStore
from sparksync_agent.models.usage import workloads_using

__all__ = ["JobBoard", "ModelError", "ModelStore", "workloads_using"]
