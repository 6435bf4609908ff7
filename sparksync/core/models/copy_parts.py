"""The parts of one target's copy: its progress events, its clock, its steps' seconds, the early sha256 check."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from sparksync_agent.protocol import ModelFile, VerifyRequest

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.models.nodes import ModelNodes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CopyEvent:
    """One step of one target's copy: what the faces draw a bar or a JSON line from."""

    node: str
    phase: str  # checking, waiting, relaying, copying, verifying, recopying, done, present, failed, cancelled
    source: str | None = None
    route: str | None = None
    bytes_done: int = 0
    bytes_total: int = 0
    rate_bps: float | None = None
    eta_s: float | None = None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"event": "progress", **asdict(self)}


@dataclass
class Moved:
    """What one copy's transfers sent: rsync's literal bytes, the bytes done, the files sent from staging."""

    literal: int | None = None
    bytes: int = 0
    early: list[str] = field(default_factory=list)

    def add(self, literal: int | None, nbytes: int, early: list[str]) -> None:
        if literal is not None:
            self.literal = (self.literal or 0) + literal
        self.bytes += nbytes
        self.early += early


class EarlyCheck:
    """Hashes on the target each file that has arrived while the next ones are still on the wire.

    rsync writes a file under a temporary name and renames it when it is whole,
    so a file under its own name with its manifest size has landed. The final
    check then hashes only what this one has not (the agent's cache keys on size,
    mtime and inode, so a file rsync replaced afterwards is hashed again). Each
    file it finds good is ``on_ok``'s: from then on the target may pass it on.

    It asks when the transfer's bytes (``landed``) have passed the end of a file
    it waits for (rsync sends in the list's order), and at the latest every
    ``EVERY_S``: not a poll of every target four times a second.
    """

    EVERY_S = 1.0

    def __init__(self, nodes: ModelNodes, name: str, manifest: list[ModelFile], target: str, files: list[str],
                 skip: list[str], on_ok: Callable[[list[str]], None]):  # fmt: skip
        self.nodes, self.name, self.target, self.on_ok = nodes, name, target, on_ok
        sizes = {f.path: f.size for f in manifest}
        mine = [f for f in manifest if f.path in set(files)]
        self.ends = dict(zip([f.path for f in mine], itertools.accumulate(sizes[f.path] for f in mine)))
        self.todo = [f for f in mine if f.path not in set(skip)]
        self.ok: list[str] = []
        self._stop, self._wake = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"model-check:{target}", daemon=True)
        self._thread.start()

    def landed(self, nbytes: int) -> None:
        """The transfer has sent ``nbytes`` of these files' bytes."""
        todo = self.todo
        if todo and self.ends[todo[0].path] <= nbytes:
            self._wake.set()

    def stop(self) -> list[str]:
        self._stop.set()
        self._wake.set()
        self._thread.join(60)
        return list(self.ok)

    def _run(self) -> None:
        # The last file too: the next node can then take it with the one before, in one push.
        while self.todo:
            self._wake.wait(self.EVERY_S)
            self._wake.clear()
            if self._stop.is_set():
                return
            request = VerifyRequest(name=self.name, files=self.todo, staging=True)
            try:
                verdict = self.nodes.call(self.target, lambda c: c.verify_model(request))
            except SparkSyncError as exc:
                log.debug("early check on %s: %s", self.target, exc)
                return
            bad = set(verdict.mismatched) | set(verdict.missing)
            done = [f for f in self.todo if f.path not in bad]
            self.ok += [f.path for f in done]
            if done:
                self.on_ok([f.path for f in done])
            # A wrong one is left to the final check (fresh): not hashed again every second.
            self.todo = [f for f in self.todo if f not in done and f.path not in verdict.mismatched]


class Lap:
    """Seconds since the last lap, under a step's name."""

    def __init__(self, phases: dict[str, float]):
        self.phases, self.last = phases, time.monotonic()

    def __call__(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = self.phases.get(name, 0.0) + now - self.last
        self.last = now


class Clock:
    """Bytes, rate and ETA of one target's transfer."""

    def __init__(self, node: str, source: str, route: str, total: int, emit: Callable[[CopyEvent], None],
                 phase: str = "copying", landed: Callable[[int], None] | None = None):  # fmt: skip
        self.node, self.source, self.route, self.total, self.emit, self.phase = node, source, route, total, emit, phase
        self.landed = landed or (lambda nbytes: None)
        self.started = time.monotonic()
        self.last_emit = 0.0
        self.done = -1

    def tick(self, done: int) -> None:
        done = min(done, self.total)
        self.landed(done)
        now = time.monotonic()
        if done == self.done and now - self.last_emit < 1.0:
            return
        self.done, self.last_emit = done, now
        elapsed = max(now - self.started, 1e-6)
        rate = done / elapsed if done else None
        eta = (self.total - done) / rate if rate else None
        self.emit(CopyEvent(self.node, self.phase, self.source, self.route, done, self.total, rate, eta))
