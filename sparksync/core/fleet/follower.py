"""Keeps every node's telemetry flowing, and resumes where it left off after a cut.

One thread per node follows the agent's telemetry stream through the node's
``AgentLink``. It remembers the run id and the last sequence number it
delivered; after a dropped link the stream asks for ``since=<last seq>`` and
the agent sends what its ring buffer (11 minutes) kept meanwhile, so a cut
shorter than that loses nothing. Samples older than the ring come back as
a ``lost`` count; an agent restart (new run id) starts the sequence over.

While it follows, the thread keeps the node's state current in the
``Fleet``: online when the stream (re)connects, offline when the SSH link is
down, degraded when the link is up but the agent is not answering; a
degraded node is re-read from scratch (a restarted agent has a new port).
State changes reach ``Fleet.on_change``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sparksync_agent.protocol import Sample

from sparksync.core.agents.client import AgentClient
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.fleet.fleet import Fleet, collector_problem
from sparksync.core.fleet.problems import NodeProblem
from sparksync.core.fleet.state import NodeState
from sparksync.core.nodes.registry import PairedNode
from sparksync.core.agents.stream import Backoff as StreamBackoff
from sparksync.core.agents.stream import Connected, Disconnected, Lost, Restarted, TelemetryStream

log = logging.getLogger(__name__)

RETRY_FIRST_S = 0.5
RETRY_MAX_S = 10.0
SAVE_LAST_SEEN_EVERY_S = 30.0
STREAM_BACKOFF = StreamBackoff(first=0.25, factor=2.0, maximum=2.0)

SampleCallback = Callable[[str, Sample], None]
LostCallback = Callable[[str, int], None]  # node, how many samples the ring no longer held
RestartCallback = Callable[[str, str], None]  # node, new run id


@dataclass(frozen=True)
class Position:
    """How far a node's telemetry has been delivered."""

    run_id: str | None
    last_seq: int
    lost: int  # samples missed for good (older than the ring when we came back)
    delivered: int


class TelemetryFollower:
    """Follows the telemetry of ``names`` (default: every paired node) until ``stop()``."""

    def __init__(
        self,
        fleet: Fleet,
        names: Iterable[str] | None = None,
        *,
        on_sample: SampleCallback | None = None,
        on_lost: LostCallback | None = None,
        on_restart: RestartCallback | None = None,
    ):
        self.fleet = fleet
        self._nodes = fleet.nodes(names)
        self._callbacks = (on_sample, on_lost, on_restart)
        self._followers = {node.name: _NodeFollower(node, fleet, self._callbacks) for node in self._nodes}

    def start(self) -> None:
        for follower in self._followers.values():
            follower.start()

    def stop(self) -> None:
        """Stop every node's thread and wait for them (any thread but theirs)."""
        for follower in self._followers.values():
            follower.request_stop()
        for follower in self._followers.values():
            follower.join()

    def position(self, name: str) -> Position:
        return self._followers[name].position()

    def __enter__(self) -> TelemetryFollower:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _NodeFollower:
    def __init__(self, node: PairedNode, fleet: Fleet, callbacks: tuple):
        self.node = node
        self.fleet = fleet
        self.on_sample, self.on_lost, self.on_restart = callbacks
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._stream: TelemetryStream | None = None
        self._run_id: str | None = None
        self._since = 0
        self._lost = 0
        self._delivered = 0
        self._saved_at = 0.0
        self._thread = threading.Thread(target=self._run, name=f"fleet-follow-{node.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        with self._lock:
            self._stop.set()
            if self._stream is not None:
                self._stream.close()

    def join(self) -> None:
        if self._thread.is_alive():
            self._thread.join()

    def position(self) -> Position:
        with self._lock:
            return Position(self._run_id, self._since, self._lost, self._delivered)

    # --- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._follow_until_stopped()
        except Exception:
            log.exception("telemetry follower for %s crashed", self.node.name)

    def _follow_until_stopped(self) -> None:
        link = self.fleet.link(self.node.name)
        delay, reread = RETRY_FIRST_S, False
        while not self._stop.is_set():
            try:
                client, _hello = link.hello(self._stop, reread=reread)
                reread = False
                if self._follow(client):
                    delay = RETRY_FIRST_S
            except NodeProblem as problem:
                if self._stop.is_set():
                    return
                self._apply(problem)
            reread = True
            if self._stop.wait(delay):
                return
            delay = min(delay * 2, RETRY_MAX_S)

    def _follow(self, client: AgentClient) -> bool:
        """Stream until the agent seems gone; True if samples came. Raises NodeProblem."""
        stream = client.stream(since=self._since, run_id=self._run_id, backoff=STREAM_BACKOFF)
        with self._lock:
            if self._stop.is_set():
                return False
            self._stream = stream
        delivered = False
        try:
            for item in stream:
                if isinstance(item, Sample):
                    delivered = True
                    self._deliver(item)
                elif not self._handle(item, client):
                    break
        except SparkSyncError as exc:  # a refused token, another protocol MAJOR
            raise self.fleet.link(self.node.name).explain(exc) from exc
        finally:
            stream.close()
            with self._lock:
                self._stream = None
        return delivered

    def _handle(self, item: object, client: AgentClient) -> bool:
        """React to a stream marker; False ends this stream (the agent must be found again)."""
        name = self.node.name
        if isinstance(item, Connected):
            with self._lock:
                self._run_id = item.run_id
            link = self.fleet.link(name)
            self._apply(collector_problem(self.node, link.status(client)))
        elif isinstance(item, Lost):
            if item.since > 0:  # from 0 it only says that older history is gone
                with self._lock:
                    self._lost += item.lost
                log.warning("node %s: %d samples were lost while it was away", name, item.lost)
                if self.on_lost is not None:
                    self.on_lost(name, item.lost)
        elif isinstance(item, Restarted):
            with self._lock:
                self._run_id, self._since = item.new_run_id, 0
            if self.on_restart is not None:
                self.on_restart(name, item.new_run_id)
        elif isinstance(item, Disconnected):
            problem = self.fleet.link(name).explain(item.error)
            self._apply(problem)
            # Offline: the stream keeps retrying and resumes once SSH is back. Degraded:
            # the agent stopped or moved to another port; find it again from its endpoint.
            return problem.state is NodeState.OFFLINE
        return True

    def _deliver(self, sample: Sample) -> None:
        with self._lock:
            self._since = sample.seq
            self._delivered += 1
        if self.on_sample is not None:
            self.on_sample(self.node.name, sample)
        self.fleet.seen(self.node)
        now = time.monotonic()
        if now - self._saved_at > SAVE_LAST_SEEN_EVERY_S:
            self._saved_at = now
            self._save()

    def _apply(self, problem: NodeProblem | None) -> None:
        self.fleet.apply(self.node, problem, save=None)

    def _save(self) -> None:
        try:
            self.fleet.save([self.node])
        except OSError as exc:
            log.warning("could not save the state of %s: %s", self.node.name, exc)
