"""The fan-out's schedule: which node serves which target, and nodes that serve while they still receive.

Each node has a ``Supply``: the files of the model it holds verified (a sha256
against the source's manifest) and whether its copy has ended. A source serves
one copy at a time (a copy is bound by the source's link). A target is offered
as a source as soon as its first file is verified: its copy to the next node
goes batch by batch, each file once it is verified on the source, while later
files still arrive (``Supply.serve``). With links bound by each node's egress,
every node passing the model on to one other keeps every link busy: with four
files, seven targets take about (4 + 6) / 4 = 2.5 copies' time in a chain, and
less as the first nodes finish and take more targets, against three whole
rounds for a tree of complete copies.

A source that fails or is stopped mid-way leaves the targets it was serving
without their next files: they go back to the queue (``Requeue``) for another
source, keeping what they have, and are never reported failed for it. A node
never serves a target whose files it is itself waiting on (no cycle).
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

from sparksync.core.models.errors import CopyCancelled, ModelError

log = logging.getLogger(__name__)

R = TypeVar("R")
RECEIVING, FINALIZING, COMPLETE, FAILED = "receiving", "finalizing", "complete", "failed"
WAIT_S = 0.2  # how often a wait looks at the stop flag


class SourceLost(ModelError):
    """The source of a copy failed or stopped before it had every file the target needs."""


@dataclass(frozen=True)
class Requeue:
    """What a copy ends with when its source went away: the target waits for another."""

    source: str
    reason: str


@dataclass(frozen=True)
class Batch:
    files: list[str]
    from_staging: bool  # the source still receives: these come from its staging folder


class Supply:
    """One node's copy as the nodes it serves see it."""

    def __init__(self, node: str, complete: bool, on_change: Callable[[], None]):
        self.node = node
        self.state = COMPLETE if complete else RECEIVING
        self.verified: set[str] = set()
        self.upstream: str | None = None  # the node it is receiving from now
        self.depth = 0  # nodes still receiving between it and a complete copy, itself included
        self._readers = 0  # pushes reading its staging folder now
        self._cond = threading.Condition()
        self._on_change = on_change

    @property
    def offered(self) -> bool:
        return self.state == COMPLETE or (self.state != FAILED and bool(self.verified))

    def verified_files(self, files: list[str]) -> None:
        with self._cond:
            new = set(files) - self.verified
            self.verified |= new
            self._cond.notify_all()
        if new:
            self._on_change()

    def finish(self, ok: bool) -> None:
        with self._cond:
            self.state = COMPLETE if ok else FAILED
            self.depth = 0
            self._cond.notify_all()
        self._on_change()

    def finalizing(self, cancel: threading.Event) -> None:
        """Before the copy moves out of staging: wait for the pushes reading it; new ones wait for the end."""
        with self._cond:
            self.state = FINALIZING
            while self._readers and not cancel.is_set():
                self._cond.wait(WAIT_S)

    @contextmanager
    def serve(self, wanted: list[str], cancel: threading.Event, whole: bool = False) -> Iterator[Batch]:
        """The next files of ``wanted`` this node can send, waiting for them; all of them once it is complete.

        A batch from staging holds off the move into place (``finalizing``) until
        it is sent. ``whole``: wait for the complete copy. Raises ``SourceLost``
        when the copy here failed, ``CopyCancelled`` when the run stops.
        """
        batch = self._take(wanted, cancel, whole)
        try:
            yield batch
        finally:
            if batch.from_staging:
                with self._cond:
                    self._readers -= 1
                    self._cond.notify_all()

    def _take(self, wanted: list[str], cancel: threading.Event, whole: bool) -> Batch:
        with self._cond:
            while True:
                if cancel.is_set():
                    raise CopyCancelled("stopped; what arrived is kept in the target's staging folder")
                if self.state == COMPLETE:
                    return Batch(list(wanted), False)
                if self.state == FAILED:
                    raise SourceLost(f"{self.node} stopped before it had every file")
                ready = [f for f in wanted if f in self.verified]
                if ready and self.state == RECEIVING and not whole:
                    self._readers += 1
                    return Batch(ready, True)
                self._cond.wait(WAIT_S)


class Board:
    """Every node's supply; ``changed`` is set whenever one moves (a file verified, a copy ended)."""

    def __init__(self) -> None:
        self.supplies: dict[str, Supply] = {}
        self.changed = threading.Event()
        self.busy: dict[str, str] = {}  # source -> the target it serves now
        self._lock = threading.Lock()

    def lend(self, source: str, target: str) -> None:
        with self._lock:
            self.busy[source] = target

    def give_back(self, source: str, target: str) -> None:
        """``source`` has sent ``target`` what it had to: free to serve the next one (once per copy)."""
        with self._lock:
            if self.busy.get(source) == target:
                del self.busy[source]
        self.changed.set()

    def idle(self, node: str) -> bool:
        with self._lock:
            return node not in self.busy

    def add(self, node: str, complete: bool = False) -> Supply:
        supply = self.supplies[node] = Supply(node, complete, self.changed.set)
        return supply

    def __getitem__(self, node: str) -> Supply:
        return self.supplies[node]

    def waits_on(self, source: str, target: str) -> bool:
        """Whether ``source``'s files come, through the nodes serving it now, from ``target``."""
        node: str | None = source
        seen: set[str] = set()
        while node is not None and node not in seen and self.supplies[node].state != COMPLETE:
            if node == target:
                return True
            seen.add(node)
            node = self.supplies[node].upstream
        return False


class FanOut(Generic[R]):
    """Runs ``copy_one(source, target)`` for every target, each source serving one at a time.

    ``copy_one`` may hand its source back (``Board.give_back``) once its bytes
    are sent, before its own check and move into place; it ends its target's
    supply (``finish``) or returns a ``Requeue``;
    one that ends otherwise leaves it failed. ``not_started(target, why)`` is the
    result of a target the run stopped before it began.

    ``max_depth`` bounds a chain of nodes that each pass on what they still
    receive: each link of it ends about one file's time after the one before
    it, while the first source is free again after one whole copy, that is
    after about (model size / largest file) files' time. A chain longer than
    that finishes later than a new branch from a complete copy would.
    """

    def __init__(
        self,
        board: Board,
        copy_one: Callable[[str, str], R | Requeue],
        not_started: Callable[[str, str], R],
        cancel: threading.Event,
        max_depth: int = 4,
    ):
        self.board, self.copy_one, self.not_started, self.cancel = board, copy_one, not_started, cancel
        self.max_depth = max_depth

    def run(self, targets: list[str]) -> dict[str, R]:
        results: dict[str, R] = {}
        pending: deque[str] = deque(targets)
        running: dict[Future, tuple[str, str]] = {}
        avoid: dict[str, set[str]] = defaultdict(set)  # sources lost by each target
        with ThreadPoolExecutor(max_workers=max(1, len(targets)), thread_name_prefix="model-copy") as pool:
            try:
                while pending or running:
                    self.board.changed.clear()
                    if not self.cancel.is_set():
                        self._start(pool, pending, running, avoid)
                    if not running:
                        break
                    self.board.changed.wait(0.5)
                    for future in [f for f in running if f.done()]:
                        source, target = running.pop(future)
                        self.board.give_back(source, target)
                        result = self._outcome(future, target)
                        if isinstance(result, Requeue) and not self.cancel.is_set():
                            log.info("%s lost its source %s (%s): back in the queue", target, source, result.reason)
                            avoid[target].add(source)
                            pending.appendleft(target)
                        elif isinstance(result, Requeue):
                            results[target] = self.not_started(target, "stopped while waiting for another source")
                        else:
                            results[target] = result
                    if self.cancel.is_set():
                        results.update({t: self.not_started(t, "not started") for t in pending})
                        pending.clear()
            except KeyboardInterrupt:
                self.cancel.set()
                for future in running:
                    future.exception()  # each copy stops on the flag; what arrived stays
                raise
        for target in pending:  # no source left that could serve them (cannot happen while the first one lives)
            results[target] = self.not_started(target, "no source was left to copy from")
        return results

    def _outcome(self, future: Future, target: str) -> R | Requeue:
        supply = self.board[target]
        try:
            result = future.result()
        except BaseException:
            supply.finish(False)
            self.cancel.set()  # a bug: stop the others too, then say it
            raise
        if not isinstance(result, Requeue) and supply.state != COMPLETE:
            supply.finish(False)  # whoever waits on it looks for another source
        return result

    def _start(self, pool: ThreadPoolExecutor, pending: deque[str], running: dict[Future, tuple[str, str]],
               avoid: dict[str, set[str]]) -> None:  # fmt: skip
        for target in list(pending):
            source = self._pick(target, avoid[target])
            if source is None:
                continue
            pending.remove(target)
            self.board.lend(source, target)
            supply, upstream = self.board[target], self.board[source]
            supply.upstream = source
            supply.depth = 1 if upstream.state == COMPLETE else upstream.depth + 1
            future = pool.submit(self.copy_one, source, target)
            future.add_done_callback(lambda _f: self.board.changed.set())
            running[future] = (source, target)

    def _pick(self, target: str, avoid: set[str]) -> str | None:
        """An idle source for ``target``: a complete copy first, else the one that holds the most files."""
        candidates = [
            s for node, s in self.board.supplies.items()
            if node != target and self.board.idle(node) and node not in avoid and s.offered
            and (s.state == COMPLETE or s.depth < self.max_depth) and not self.board.waits_on(node, target)
        ]  # fmt: skip
        if not candidates:
            return None
        best = max(candidates, key=lambda s: (s.state == COMPLETE, len(s.verified)))  # max keeps the first of equals
        return best.node
