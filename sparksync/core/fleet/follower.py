"""Keeps every node's telemetry flowing through its agent link, and resumes where it left off after a cut.

One thread per node follows the agent's telemetry stream through the link
the fleet hands out for it (``Fleet.agent``: this computer's local agent,
or a paired node's through SSH). It remembers the run id and the last
sequence number it delivered; after a dropped link the stream asks for
``since=<last seq>`` and the agent sends what its ring buffer (11 minutes)
kept meanwhile, so a cut shorter than that loses nothing. Samples older
than the ring are counted as lost; an agent restart (new run id) starts
the sequence over. Either way the time without samples is reported as a
``Gap`` (from the last sample before to the first one after) so the
timeline can mark it.

While it follows, the thread keeps the node's state current in the
``Fleet``: online when the stream (re)connects, offline when the SSH link is
down, degraded when the link is up but the agent is not answering; a
degraded node's agent is found again from scratch (a restarted agent has a
new port, and a local agent that died is started again). Retries wait
``RETRY`` delays (``base.backoff``).

Everything it has to say goes to one ``on_event`` callback, from the node's
thread: ``Connecting``, ``Ready`` (a snapshot per connection), ``Live``,
``SampleIn``, ``Gap``, ``Trouble`` (told once per kind of failure, again only
after the node was live or a new kind came), ``Retrying`` and, last,
``Ended``. The GUI turns them into Qt signals; nothing here knows Qt.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, Union

from sparksync_agent.protocol import Sample, Snapshot

from sparksync.core.agents.client import AgentClient
from sparksync.core.agents.link import AgentLink
from sparksync.core.agents.stream import Connected, Disconnected, Lost, Restarted, TelemetryStream
from sparksync.core.base.backoff import Backoff
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.fleet.problems import NodeProblem, collector_problem, degraded
from sparksync.core.fleet.state import Cause, NodeState

log = logging.getLogger(__name__)

RETRY = Backoff(first_s=0.5, factor=2.0, max_s=10.0)  # finding the agent again
STREAM_RETRY = Backoff(first_s=0.25, factor=2.0, max_s=2.0)  # the stream's own reconnects
SAVE_LAST_SEEN_EVERY_S = 30.0
RESTART_GAP = "the agent restarted"
RESTART_NOTICE = "its agent stopped and a new one answers; the gap in the plots is marked"


# --- what a follower tells --------------------------------------------------------------------


@dataclass(frozen=True)
class Connecting:
    node: str


@dataclass(frozen=True)
class Ready:
    """Connected: the agent's snapshot (node info and latest sample), once per connection."""

    node: str
    snapshot: Snapshot


@dataclass(frozen=True)
class Live:
    """The stream is up; earlier trouble is over."""

    node: str
    run_id: str


@dataclass(frozen=True)
class SampleIn:
    node: str
    sample: Sample


@dataclass(frozen=True)
class Gap:
    """No samples from ``start`` to ``end`` (Unix times): the agent restarted, or the ring overflowed."""

    node: str
    start: float
    end: float
    reason: str


@dataclass(frozen=True)
class Trouble:
    """The node cannot be followed now; told once per kind of failure."""

    node: str
    message: str
    problem: NodeProblem


@dataclass(frozen=True)
class Retrying:
    node: str
    delay_s: float


@dataclass(frozen=True)
class Ended:
    """The node's thread has ended (after ``remove``, ``stop`` or a bug); the last event of a node."""

    node: str


FollowEvent = Union[Connecting, Ready, Live, SampleIn, Gap, Trouble, Retrying, Ended]
EventCallback = Callable[[FollowEvent], None]


@dataclass(frozen=True)
class Position:
    """How far a node's telemetry has been delivered."""

    run_id: str | None
    last_seq: int
    lost: int  # samples missed for good (older than the ring when we came back)
    delivered: int


class Agents(Protocol):
    """What the follower needs from the fleet (``Fleet`` has it all)."""

    def agent(self, name: str) -> AgentLink: ...
    def apply(self, node: str, problem: NodeProblem | None, *, save: bool | None = None) -> object: ...
    def seen(self, node: str) -> object: ...
    def save(self, nodes: Iterable[str]) -> None: ...


# --- the follower -------------------------------------------------------------------------------


class TelemetryFollower:
    """Follows the telemetry of ``names`` (default: every node of the fleet) until ``stop()``."""

    def __init__(
        self,
        fleet: Agents,
        names: Iterable[str] | None = None,
        *,
        on_event: EventCallback | None = None,
        retry: Backoff = RETRY,
        stream_retry: Backoff = STREAM_RETRY,
    ):
        self.fleet = fleet
        self.on_event = on_event
        self.retry, self.stream_retry = retry, stream_retry
        chosen = list(names) if names is not None else getattr(fleet, "names")()
        self._lock = threading.Lock()
        self._started = False
        self._followers: dict[str, _NodeFollower] = {}
        self._done: list[_NodeFollower] = []  # removed ones, joined by stop()/join()
        for name in chosen:
            self._followers[name] = self._made(name)

    def start(self) -> None:
        with self._lock:
            self._started = True
            followers = list(self._followers.values())
        for follower in followers:
            follower.start()

    def add(self, name: str) -> None:
        """Follow ``name`` too (at once when started); a name already followed is left as is."""
        with self._lock:
            if name in self._followers:
                return
            follower = self._followers[name] = self._made(name)
            started = self._started
        if started:
            follower.start()

    def remove(self, name: str) -> None:
        """Stop following ``name``; returns at once (its ``Ended`` event comes once its thread ends)."""
        with self._lock:
            follower = self._followers.pop(name, None)
            if follower is not None:
                self._done.append(follower)
        if follower is not None:
            follower.request_stop()

    def names(self) -> list[str]:
        with self._lock:
            return list(self._followers)

    def retry_now(self, name: str) -> bool:
        """Cut ``name``'s wait before its next connection attempt short (its agent was just deployed, say).

        False when ``name`` is not followed. A node that is live is left as it is.
        """
        with self._lock:
            follower = self._followers.get(name)
        if follower is None:
            return False
        follower.wake()
        return True

    def request_stop(self) -> None:
        """Ask every node's thread to end; returns at once (any thread)."""
        with self._lock:
            followers = [*self._followers.values(), *self._done]
        for follower in followers:
            follower.request_stop()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every thread that was asked to stop; True when all have ended."""
        with self._lock:
            followers = [*self._followers.values(), *self._done]
        deadline = None if timeout is None else time.monotonic() + timeout
        for follower in followers:
            follower.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(f.alive() for f in followers)

    def stop(self) -> None:
        """Stop every node's thread and wait for them (any thread but theirs)."""
        self.request_stop()
        self.join()

    def position(self, name: str) -> Position:
        with self._lock:
            follower = self._followers[name]
        return follower.position()

    def __enter__(self) -> TelemetryFollower:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _made(self, name: str) -> _NodeFollower:
        return _NodeFollower(name, self.fleet, self._emit, self.retry, self.stream_retry)

    def _emit(self, event: FollowEvent) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:  # a listener's bug must not end the node's telemetry
            log.exception("telemetry listener failed on %r", event)


class _NodeFollower:
    def __init__(self, name: str, fleet: Agents, emit: EventCallback, retry: Backoff, stream_retry: Backoff):
        self.name = name
        self.fleet = fleet
        self.emit = emit
        self.retry, self.stream_retry = retry, stream_retry
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by stop or retry_now: the wait between attempts ends early
        self._lock = threading.Lock()
        self._stream: TelemetryStream | None = None
        self._run_id: str | None = None
        self._since = 0
        self._lost = 0
        self._delivered = 0
        self._last_ts: float | None = None  # the newest sample delivered
        self._gap: tuple[float, str] | None = None  # (start, why) until the next sample ends it
        self._told: object = None  # the failure told last; None once the node is live
        self._saved_at = 0.0
        self._thread = threading.Thread(target=self._run, name=f"telemetry-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        with self._lock:
            self._stop.set()
            self._wake.set()
            if self._stream is not None:
                self._stream.close()

    def wake(self) -> None:
        self._wake.set()

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def alive(self) -> bool:
        return self._thread.is_alive()

    def position(self) -> Position:
        with self._lock:
            return Position(self._run_id, self._since, self._lost, self._delivered)

    # --- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._follow_until_stopped()
        except Exception as exc:  # a bug must reach the user, not vanish with the thread
            log.exception("telemetry follower for %s crashed", self.name)
            problem = NodeProblem(
                NodeState.DEGRADED, Cause.AGENT_NOT_ANSWERING, f"internal error ({exc}); please report this bug"
            )
            self.emit(Trouble(self.name, f"{self.name}: {problem.reason}", problem))
        finally:
            self.emit(Ended(self.name))

    def _follow_until_stopped(self) -> None:
        link = self.fleet.agent(self.name)
        delays, reread = self.retry.delays(), False
        while not self._stop.is_set():
            self.emit(Connecting(self.name))
            try:
                client, _hello = link.hello(self._stop, reread=reread)
                reread = False
                self.emit(Ready(self.name, self._snapshot(link, client)))
                if self._follow(link, client):
                    delays = self.retry.delays()  # a healthy run earns a fresh, short wait
            except NodeProblem as problem:
                if self._stop.is_set():
                    return
                self._apply(problem)
                self._trouble(problem)
            reread = True
            if self._stop.is_set():
                return
            delay = next(delays)
            self.emit(Retrying(self.name, delay))
            woken = self._wake.wait(delay)
            self._wake.clear()
            if self._stop.is_set():
                return
            if woken:  # asked to try again now: the next failures start from a short wait again
                delays, reread = self.retry.delays(), True

    def _snapshot(self, link: AgentLink, client: AgentClient) -> Snapshot:
        try:
            return client.snapshot()
        except SparkSyncError as exc:
            raise link.explain(exc) from exc

    def _follow(self, link: AgentLink, client: AgentClient) -> bool:
        """Stream until the agent seems gone; True if samples came. Raises NodeProblem."""
        stream = client.stream(since=self._since, run_id=self._run_id, backoff=self.stream_retry)
        with self._lock:
            if self._stop.is_set():
                stream.close()
                return False
            self._stream = stream
        delivered = False
        try:
            for item in stream:
                if isinstance(item, Sample):
                    delivered = True
                    self._deliver(item)
                elif not self._handle(item, link, client):
                    break
        except SparkSyncError as exc:  # a refused token, another protocol MAJOR
            raise link.explain(exc) from exc
        finally:
            stream.close()
            with self._lock:
                self._stream = None
        return delivered

    def _handle(self, item: object, link: AgentLink, client: AgentClient) -> bool:
        """React to a stream marker; False ends this stream (the agent must be found again)."""
        name = self.name
        if isinstance(item, Connected):
            with self._lock:
                self._run_id = item.run_id
            problem = collector_problem(name, link.status(client))
            self._apply(problem)
            if problem is None:
                self._told = None
                self.emit(Live(name, item.run_id))
            else:
                self._trouble(problem)
        elif isinstance(item, Lost):
            if item.since > 0:  # from 0 it only says that older history is gone
                with self._lock:
                    self._lost += item.lost
                log.warning("node %s: %d samples were lost while it was away", name, item.lost)
                self._open_gap(f"{item.lost} samples were lost while the node was away")
        elif isinstance(item, Restarted):
            with self._lock:
                self._run_id, self._since = item.new_run_id, 0
            self._open_gap(RESTART_GAP)
            if self._told is None:
                # Killed and started again between two reads, the agent leaves no failed read to tell
                # of: the user hears of it all the same, then the node is live again.
                self._trouble(degraded(Cause.AGENT_NOT_RUNNING, RESTART_NOTICE))
        elif isinstance(item, Disconnected):
            problem = link.explain(item.error)
            self._apply(problem)
            self._trouble(problem)
            # Offline: the stream keeps retrying and resumes once SSH is back. Degraded:
            # the agent stopped or moved to another port; find it again from its endpoint.
            return problem.state is NodeState.OFFLINE
        return True

    def _open_gap(self, why: str) -> None:
        if self._last_ts is not None and self._gap is None:
            self._gap = (self._last_ts, why)

    def _deliver(self, sample: Sample) -> None:
        with self._lock:
            self._since = sample.seq
            self._delivered += 1
        gap, self._gap = self._gap, None
        if gap is not None and sample.ts > gap[0]:
            self.emit(Gap(self.name, gap[0], sample.ts, gap[1]))
        self._last_ts = sample.ts
        self.emit(SampleIn(self.name, sample))
        self.fleet.seen(self.name)
        now = time.monotonic()
        if now - self._saved_at > SAVE_LAST_SEEN_EVERY_S:
            self._saved_at = now
            self._save()

    def _trouble(self, problem: NodeProblem) -> None:
        # A node's problem has a state and a cause; its message may vary in detail between retries.
        key = (problem.state, problem.cause)
        if key != self._told:
            self._told = key
            self.emit(Trouble(self.name, f"{self.name}: {problem.reason}", problem))

    def _apply(self, problem: NodeProblem | None) -> None:
        try:
            self.fleet.apply(self.name, problem, save=None)
        except SparkSyncError as exc:  # unpaired meanwhile: its thread is being stopped
            log.info("node %s: state not recorded (%s)", self.name, exc)

    def _save(self) -> None:
        try:
            self.fleet.save([self.name])
        except (OSError, SparkSyncError) as exc:
            log.warning("could not save the state of %s: %s", self.name, exc)
