"""Deploy progress for the node list: the deploy code's per-stage events as one bar per node.

``deploy_many`` reports ``ProgressEvent(node, stage, fraction within the
stage)``. A progress bar wants the fraction of the whole deploy, so each
stage gets a share of the bar, roughly by how long it takes (the upload and
the install dominate). ``DeployFeed`` is a ``DeployProgressSource``: the
Nodes panel subscribes once and sees every deploy started through it.
"""

from __future__ import annotations

from collections.abc import Callable

from sparksync.core.deploy.model import DeployResult, ProgressEvent, Stage
from sparksync.core.base.listeners import Listeners
from sparksync.core.nodes.rows import DeployProgress

# Where each stage starts and ends on the bar (0..1).
STAGE_SPANS: dict[Stage, tuple[float, float]] = {
    Stage.CHECKING: (0.0, 0.1),
    Stage.UPLOADING: (0.1, 0.45),
    Stage.INSTALLING: (0.45, 0.8),
    Stage.STARTING: (0.8, 0.9),
    Stage.HEALTH: (0.9, 1.0),
    Stage.ROLLING_BACK: (0.9, 1.0),
    Stage.DONE: (1.0, 1.0),
}
STAGE_WORDS = {
    Stage.CHECKING: "checking the node",
    Stage.UPLOADING: "uploading the agent",
    Stage.INSTALLING: "installing",
    Stage.STARTING: "starting the agent",
    Stage.HEALTH: "waiting for the agent to answer",
    Stage.ROLLING_BACK: "rolling back",
    Stage.DONE: "done",
}


def to_progress(event: ProgressEvent) -> DeployProgress:
    start, end = STAGE_SPANS[event.stage]
    within = max(0.0, min(1.0, event.fraction))
    words = STAGE_WORDS[event.stage] + (f": {event.message}" if event.message else "")
    return DeployProgress(event.node, words, start + (end - start) * within)


def summary_text(results: list[DeployResult]) -> str:
    """The outcome of a deploy in plain words: how many nodes run the agent, and why the others do not."""
    good = [r for r in results if r.ok]
    if not results:
        return "Nothing was deployed."
    lines = [f"{len(good)} of {len(results)} node(s) run the agent {_versions(good)}".rstrip() + "."]
    for r in results:
        if not r.ok:
            lines.append(f"{r.node}: {r.outcome.value} — {r.reason or 'no reason given'}")
    return "\n".join(lines)


def _versions(results: list[DeployResult]) -> str:
    versions = sorted({r.version for r in results if r.version})
    return ", ".join(versions)


def finished(result: DeployResult) -> DeployProgress:
    error = None if result.ok else (result.reason or result.outcome.value)
    return DeployProgress(result.node, result.outcome.value, 1.0, done=True, error=error)


class DeployFeed:
    def __init__(self) -> None:
        self._listeners: Listeners[Callable[[DeployProgress], None]] = Listeners()

    def add_listener(self, listener: Callable[[DeployProgress], None]) -> Callable[[], None]:
        return self._listeners.add(listener)

    def publish(self, step: DeployProgress) -> None:
        for listener in self._listeners.snapshot():
            listener(step)

    def on_event(self, event: ProgressEvent) -> None:
        """The ``progress`` callback to hand to deploy_many."""
        self.publish(to_progress(event))
