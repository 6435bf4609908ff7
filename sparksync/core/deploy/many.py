"""Deploying to many nodes at once: one thread per node, progress per node, a summary at the end.

One node's failure never stops the others: every node ends with a
``DeployResult`` whatever happened to it. Progress callbacks run on the
worker threads; a GUI turns them into signals, the CLI prints them.
Successful deploys are recorded in the registry (agent version, service
mode, time); failed ones leave the registry as it was.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

from sparksync.core.deploy.bundles import BundleSource
from sparksync.core.deploy.errors import DeployCancelled
from sparksync.core.deploy.model import (
    DeployOptions,
    DeployResult,
    Outcome,
    ProgressCallback,
    ProgressEvent,
    Stage,
)
from sparksync.core.deploy.node_deploy import NodeDeploy, NodeOutcome, RolledBack
from sparksync.core.deploy.remote import RemoteNode
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.fleet.state import NodeState, NodeStatus
from sparksync.core.fleet.store import NodeStateStore
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.transports import NodeTransports

log = logging.getLogger(__name__)

MAX_PARALLEL = 8


def deploy_node(
    name: str,
    *,
    transports: NodeTransports,
    registry: Registry | None = None,
    options: DeployOptions | None = None,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    bundles: BundleSource | None = None,
) -> DeployResult:
    """Deploy the agent to node ``name``; never raises for the node's own problems (see the result)."""
    options = options or DeployOptions()
    cancel = cancel or threading.Event()
    started = time.monotonic()

    def report(stage: Stage, fraction: float, message: str = "") -> None:
        if progress is not None:
            progress(ProgressEvent(name, stage, fraction, message))

    def result(outcome: Outcome, **fields) -> DeployResult:
        res = DeployResult(node=name, outcome=outcome, seconds=time.monotonic() - started, **fields)
        log.info("deploy %s: %s %s", name, outcome.value, res.reason or "")
        return res

    registry = registry if registry is not None else Registry(transports.registry.path)
    before = _mark(registry, name, NodeState.DEPLOYING, "deploying the agent")
    res = _deploy(name, transports, registry, options, report, cancel, bundles, result)
    if res.outcome in _AGENT_ANSWERS:
        _mark(registry, name, NodeState.ONLINE, res.reason)
    elif before is not None and before.reachable:
        _mark(registry, name, before.state, before.reason)  # nothing changed: what ran still runs
    else:
        _mark(registry, name, NodeState.DEGRADED, f"deploy {res.outcome.value}: {res.reason}")
    return res


# After these the agent answered hello through the tunnel (the new version, or the old one again).
_AGENT_ANSWERS = (Outcome.DEPLOYED, Outcome.UNCHANGED, Outcome.ROLLED_BACK)


def _deploy(name, transports, registry, options, report, cancel, bundles, result) -> DeployResult:
    try:
        if cancel.is_set():
            raise DeployCancelled("cancelled before it started")
        node_id = registry.get(name).node_id
        transport = transports.get(name, options.connect_timeout_s, cancel)
        with RemoteNode(transport, name, cancel) as remote:
            done = NodeDeploy(
                remote, transports, options, bundles or BundleSource(options.bundle), report, node_id
            ).run()
    except RolledBack as exc:
        outcome = Outcome.CANCELLED if exc.cancelled else Outcome.ROLLED_BACK
        reason = f"cancelled; {exc}" if exc.cancelled else str(exc)
        return result(outcome, version=exc.version, service_mode=exc.mode, reason=reason)
    except DeployCancelled as exc:
        why = f"{exc}; nothing was changed on the node (a partial install was removed, the agent that ran still runs)"
        return result(Outcome.CANCELLED, version=None, service_mode=None, reason=why)
    except SparkSyncError as exc:
        if cancel.is_set():  # e.g. waiting for the transport was cut short
            return result(Outcome.CANCELLED, version=None, service_mode=None, reason=f"cancelled: {exc}")
        return result(Outcome.FAILED, version=None, service_mode=None, reason=str(exc))
    _record(registry, name, done)
    return result(
        done.outcome,
        version=done.version,
        service_mode=done.mode,
        previous_version=done.previous,
        notes=tuple(done.notes),
    )


def deploy_many(
    names: list[str],
    *,
    transports: NodeTransports,
    registry: Registry | None = None,
    options: DeployOptions | None = None,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    max_parallel: int = MAX_PARALLEL,
) -> list[DeployResult]:
    """Deploy to every node in ``names`` in parallel; results in the order of ``names``."""
    options = options or DeployOptions()
    cancel = cancel or threading.Event()
    bundles = BundleSource(options.bundle)
    if not names:
        return []

    def one(name: str) -> DeployResult:
        try:
            return deploy_node(
                name,
                transports=transports,
                registry=registry,
                options=options,
                progress=progress,
                cancel=cancel,
                bundles=bundles,
            )
        except Exception as exc:  # a bug on one node must not take the others' results with it
            log.exception("deploy %s: unexpected error", name)
            return DeployResult(name, Outcome.FAILED, None, None, 0.0, f"unexpected error: {exc!r}")

    with ThreadPoolExecutor(
        max_workers=max(1, min(max_parallel, len(names))), thread_name_prefix="deploy"
    ) as pool:
        return list(pool.map(one, names))


def _mark(registry: Registry, name: str, state: NodeState, reason: str | None) -> NodeStatus | None:
    """Tell `node list` and the GUI where the node stands; returns the state it left.

    Never fails the deploy over it: the state file only holds what the next check learns again.
    """
    store = NodeStateStore()
    try:
        node = registry.get(name)
        before, _ = store.status(node)
        store.mark(node, state, reason)
        return before
    except SparkSyncError as exc:
        log.warning("deploy %s: could not record the state %s: %s", name, state.value, exc)
        return None


def _record(registry: Registry, name: str, done: NodeOutcome) -> None:
    """Note the agent's version, how it runs and when, in the node's registry entry."""
    try:
        with registry.transaction():
            node = registry.get(name)
            update: dict[str, object] = {"agent_version": done.version, "service_mode": done.mode}
            if done.outcome is Outcome.DEPLOYED or node.deployed_at is None:
                update["deployed_at"] = datetime.now(timezone.utc)
            registry.update(node.model_copy(update=update))
    except SparkSyncError as exc:  # the node runs the agent all the same; say so rather than fail
        log.warning("deploy %s: the registry could not be updated: %s", name, exc)


# --- the summary ----------------------------------------------------------------------------

SUMMARY_HEADER = ("NODE", "RESULT", "VERSION", "SERVICE", "TIME", "REASON")


def summary_rows(results: list[DeployResult]) -> list[tuple[str, ...]]:
    return [
        (
            r.node,
            r.outcome.value,
            r.version or "-",
            r.service_mode or "-",
            f"{r.seconds:.1f}s",
            r.reason or ("; ".join(r.notes) if r.notes else ""),
        )
        for r in results
    ]


def summary_table(results: list[DeployResult]) -> str:
    """A plain-text table: one row per node, then a count line."""
    rows = [SUMMARY_HEADER, *summary_rows(results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(SUMMARY_HEADER) - 1)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row, widths)), row[-1]]).rstrip() for row in rows]
    good = sum(r.ok for r in results)
    lines.append(
        f"{good} of {len(results)} node(s) run the agent" + ("" if good == len(results) else "; see REASON")
    )
    return "\n".join(lines)
