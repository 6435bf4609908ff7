"""Copying a model to nodes: free space first, a pipelined fan-out, a sha256 check of every copy.

``ModelCopy.run(name, targets, source)``:

1. lists the nodes (one listing each, in parallel) and takes the source's
   manifest (sha256 per file);
2. refuses, before any byte moves, when a target's store cannot hold what it
   lacks (``NoSpaceError``, with the numbers per node);
3. checks the targets that already have the model with fresh sha256s: a
   good copy is a source from then on, a damaged one is repaired in place;
4. fans out, pipelined (``fanout``): every source serves one copy at a time,
   and a target serves the next one as soon as its first file is verified,
   passing on each file once it is verified there while the later ones still
   arrive (node-to-node SSH only; a relay or this computer's own end waits for
   a complete copy). A target whose source fails mid-way goes back to the
   queue for another source;
5. ends each copy with a fresh sha256 check against the source's manifest; a
   mismatch is copied once more (``--checksum``, those files only), then
   reported; only a verified copy moves into place (``finalize``).

A cut copy (Ctrl-C, a dropped link) leaves its files in the target's staging
folder, listed partial; the next run sends only what is missing (rsync
``--partial``).
"""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sparksync_agent.protocol import (
    FinalizeRequest,
    ModelEntry,
    ModelFile,
    ModelList,
    ModelState,
    PushRequest,
    ReceiveRequest,
    RootKind,
    VerifyReply,
    VerifyRequest,
)
from sparksync_agent.transfer import rsync_argv, run_rsync

from sparksync.core.agents.this_computer import LOCAL_NODE_NAME, is_local
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.base.paths import data_dir, ensure_dir
from sparksync.core.models import rsh
from sparksync.core.models.copy_parts import Clock, CopyEvent, EarlyCheck, Lap, Moved
from sparksync.core.models.errors import CopyCancelled, CopyFailedError, ModelError, NoSpaceError
from sparksync.core.models.fanout import Board, FanOut, Requeue, SourceLost
from sparksync.core.models.nodes import ModelNodes, parallel
from sparksync.core.models.rates import CopyRates
from sparksync.core.models.route import Route, Routes

log = logging.getLogger(__name__)

WAIT_S = 0.5  # a push's progress is read this often; its end is heard at once
POLL_S = 0.1  # the least time between two reads of a push (an agent that does not wait)


@dataclass
class NodeResult:
    node: str
    state: str  # copied, repaired, present, failed, cancelled
    source: str | None = None
    route: str | None = None
    seconds: float = 0.0
    bytes: int = 0
    literal_bytes: int | None = None
    recopied: list[str] = field(default_factory=list)
    message: str | None = None
    phases: dict[str, float] = field(default_factory=dict)  # seconds spent in each step
    route_detail: str | None = None  # which way and why (e.g. why not over the fabric)
    address: str | None = None  # where the source's ssh connected (an ssh route)
    served_early: list[str] = field(default_factory=list)  # files sent from the source's staging folder,
    # verified there while its own copy still went on

    @property
    def ok(self) -> bool:
        return self.state in ("copied", "repaired", "present")


@dataclass
class CopyReport:
    name: str
    size_bytes: int
    source: str
    results: list[NodeResult]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def relayed(self) -> bool:
        return any(r.route == "relay" for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            "event": "summary", "name": self.name, "size_bytes": self.size_bytes, "source": self.source,
            "seconds": round(self.seconds, 3), "ok": self.ok, "relayed": self.relayed,
            "nodes": [asdict(r) for r in self.results],
        }  # fmt: skip


@dataclass
class _Plan:
    name: str
    source: str
    entry: ModelEntry
    manifest: list[ModelFile]
    fresh: list[str]  # targets without the model
    check: list[str]  # targets with a copy to verify


class ModelCopy:
    def __init__(
        self,
        nodes: ModelNodes,
        on_event: Callable[[CopyEvent], None] | None = None,
        *,
        rates: CopyRates | None = None,
        cancel: threading.Event | None = None,
    ):
        self.nodes = nodes
        self.on_event = on_event or (lambda e: None)
        self.rates = rates if rates is not None else CopyRates()
        self.cancel = cancel or threading.Event()
        self.routes = Routes(nodes)
        self._relay: dict[str, Path] = {}
        self._relay_lock = threading.Lock()
        self._entries: dict[str, ModelEntry] = {}  # node -> its present copy (a source's directory)
        self.board = Board()

    # --- planning -------------------------------------------------------------------------------

    def plan(self, name: str, targets: list[str], source: str | None = None) -> _Plan:
        source = self.nodes.names([source])[0] if source else None
        targets = [t for t in self.nodes.names(targets) if t != source]
        if not targets:
            raise ModelError("name at least one target node other than the source (--to NODE)")
        if source:
            self.routes.ahead(source, targets)  # ssh attempts from the source while the nodes are listed
        wanted = self.nodes.names([source]) if source else self.nodes.names()
        listings = self.nodes.listings(list(dict.fromkeys([*wanted, *targets])))
        origin = source or _first_with(name, listings, exclude=targets)
        if origin is None:
            have = [n for n in listings if _present(listings[n], name)]
            raise ModelError(
                f"no node has {name} to copy from" + (f" other than the targets ({', '.join(have)})" if have else "")
                + ": fetch it first (`sparksync model fetch`) or name a --from node."
            )
        answer = listings.get(origin)
        if isinstance(answer, SparkSyncError):
            raise ModelError(f"the source {origin} cannot be asked: {answer}")
        entry = _present(answer, name) if answer is not None else None
        if entry is None:
            raise ModelError(f"{origin} has no complete copy of {name}; `sparksync model list` shows where it is.")
        if any(f.sha256 is None for f in entry.files):
            raise ModelError(f"{origin} has no manifest for {name} yet; list it again.")
        self._entries[origin] = entry
        fresh, check, refusals = [], [], []
        for target in targets:
            listing = listings[target]
            if isinstance(listing, SparkSyncError):
                raise ModelError(f"{target} cannot be asked: {listing}")
            present = _present(listing, name)
            if present is not None:
                check.append(target)
                self._entries[target] = present
                continue
            fresh.append(target)
            partial = sum(f.size for m in listing.models if m.name == name and m.state is ModelState.partial
                          for f in m.files)  # fmt: skip
            need = max(0, entry.size_bytes - partial)
            store = next((r for r in listing.roots if r.kind is RootKind.store), None)
            free = store.free_bytes if store is not None else None
            if free is not None and need > free:
                refusals.append(
                    f"{target} needs {_size(need)} and has {_size(free)} free on {store.path if store else '?'}"
                )
        if refusals:
            raise NoSpaceError(
                f"{name} ({_size(entry.size_bytes)}) does not fit: " + "; ".join(refusals)
                + ". Nothing was copied. Free some space there, or set another store for the node."
            )
        return _Plan(name, origin, entry, entry.files, fresh, check)

    # --- running ----------------------------------------------------------------------------------

    def run(self, name: str, targets: list[str], source: str | None = None) -> CopyReport:
        started = time.monotonic()
        plan = self.plan(name, targets, source)
        results: dict[str, NodeResult] = {}
        self.board = Board()
        self.board.add(plan.source, complete=True)
        repairs: dict[str, list[str]] = {}
        for target, verdict in self._verify_present(plan).items():
            if isinstance(verdict, SparkSyncError):
                results[target] = NodeResult(target, "failed", message=str(verdict))
            elif verdict.ok:
                results[target] = NodeResult(target, "present", message="already there, sha256 verified")
                self._emit(CopyEvent(target, "present", message="already there, sha256 verified"))
                self.board.add(target, complete=True)
            elif self._entries[target].root_kind is RootKind.store:
                repairs[target] = verdict.mismatched + verdict.missing
            else:
                plan.fresh.append(target)  # a damaged copy outside the store: a new one in the store
        pending = [*repairs, *plan.fresh]
        for target in pending:
            self.board.add(target)
            self._emit(CopyEvent(target, "waiting", bytes_total=plan.entry.size_bytes))
        largest = max((f.size for f in plan.manifest), default=0)
        depth = max(1, round(plan.entry.size_bytes / largest)) if largest else 1
        fan = FanOut(self.board, lambda src, target: self._one(plan, src, target, repairs.get(target)),
                     lambda target, why: NodeResult(target, "cancelled", message=why), self.cancel,
                     max_depth=depth)  # fmt: skip
        try:
            results.update(fan.run(pending))
        except KeyboardInterrupt:
            raise CopyCancelled(
                f"the copy of {name} was stopped; what arrived is kept and the next run resumes it"
            ) from None
        finally:
            self._drop_relay()
            self.routes.close()
        order = [t for t in self.nodes.names(targets) if t in results]
        report = CopyReport(name, plan.entry.size_bytes, plan.source, [results[t] for t in order],
                            time.monotonic() - started)  # fmt: skip
        return report

    def _verify_present(self, plan: _Plan) -> dict[str, VerifyReply | SparkSyncError]:
        request = VerifyRequest(name=plan.name, files=plan.manifest, staging=False)
        for target in plan.check:
            self._emit(CopyEvent(target, "checking", bytes_total=plan.entry.size_bytes))
        return parallel(plan.check, lambda n: self.nodes.call(n, lambda c: c.verify_model(request)))

    def _one(self, plan: _Plan, source: str, target: str, repair: list[str] | None) -> NodeResult | Requeue:
        started = time.monotonic()
        route: Route | None = None
        phases: dict[str, float] = {}
        lap = Lap(phases)
        supply = self.board[target]
        try:
            route = self.routes.choose(source, target)
            lap("route")
            reply = self.nodes.call(target, lambda c: c.receive_model(
                ReceiveRequest(name=plan.name, size_bytes=plan.entry.size_bytes, repair=repair is not None)))  # fmt: skip
            lap("receive")
            files = repair or [f.path for f in plan.manifest]
            known = [f for f in files if f in supply.verified]  # by an earlier try of this run (a lost source)
            early = EarlyCheck(self.nodes, plan.name, plan.manifest, target, files, known, supply.verified_files)
            try:
                moved = self._move(plan, source, target, route, reply.staging, files, checksum=repair is not None,
                                   landed=early.landed)  # fmt: skip
            finally:
                checked = early.stop()
            self.board.give_back(source, target)  # its part is done: it may serve the next while this one is checked
            lap("transfer")
            recopied: list[str] = []
            self._emit(CopyEvent(target, "verifying", source, route.kind, plan.entry.size_bytes,
                                 plan.entry.size_bytes))  # fmt: skip
            verdict = self._verify(plan, target, known + checked)
            lap("verify")
            if not verdict.ok:
                recopied = verdict.mismatched + verdict.missing
                self._emit(CopyEvent(target, "recopying", source, route.kind, 0, plan.entry.size_bytes,
                                     message=f"sha256 mismatch in {', '.join(recopied)}: copying again"))  # fmt: skip
                self._move(plan, source, target, route, reply.staging, recopied, checksum=True)
                verdict = self._verify(plan, target)
                if not verdict.ok:
                    bad = verdict.mismatched + verdict.missing
                    raise CopyFailedError(
                        f"{plan.name} on {target} still differs from {source} after a second copy "
                        f"({', '.join(bad)}); it stays partial there. Check the node's disk."
                    )
            supply.verified_files([f.path for f in plan.manifest])
            verified_s = time.monotonic() - started
            supply.finalizing(self.cancel)  # the pushes that read its staging folder end first
            lap("passing on")
            entry = self.nodes.call(target, lambda c: c.finalize_model(
                FinalizeRequest(name=plan.name, format=plan.entry.format, files=plan.manifest)))  # fmt: skip
            lap("finalize")
            self._entries[target] = entry
            supply.finish(True)
            seconds = time.monotonic() - started
            nbytes = sum(f.size for f in plan.manifest if f.path in set(files))
            if repair is None and not moved.early and moved.literal:
                self._record_rate(target, moved.literal, verified_s)  # one fed by a node still receiving is paced by it
            state = "repaired" if repair is not None or recopied else "copied"
            # A relay, or node-to-node SSH that is not the fabric's: the faces say why.
            message = route.detail if route.kind == "relay" or route.over == "management" else None
            self._emit(CopyEvent(target, "done", source, route.kind, plan.entry.size_bytes, plan.entry.size_bytes,
                                 message=message))  # fmt: skip
            log.info("%s to %s: %s", plan.name, target, ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()))
            return NodeResult(target, state, source, route.kind, seconds, nbytes, moved.literal,
                              recopied or repair or [], message, phases, route.detail, route.host,
                              moved.early)  # fmt: skip
        except SourceLost as exc:
            self._emit(CopyEvent(target, "waiting", source, bytes_total=plan.entry.size_bytes,
                                 message=f"{exc}: waiting for another source"))  # fmt: skip
            return Requeue(source, str(exc))
        except CopyCancelled as exc:
            supply.finish(False)
            self._emit(CopyEvent(target, "cancelled", source, route.kind if route else None, message=str(exc)))
            return NodeResult(target, "cancelled", source, route.kind if route else None,
                              time.monotonic() - started, message=str(exc))  # fmt: skip
        except SparkSyncError as exc:
            supply.finish(False)
            self._emit(CopyEvent(target, "failed", source, route.kind if route else None, message=str(exc)))
            return NodeResult(target, "failed", source, route.kind if route else None,
                              time.monotonic() - started, message=str(exc),
                              route_detail=route.detail if route else None)  # fmt: skip

    def _verify(self, plan: _Plan, target: str, checked: list[str] | None = None) -> VerifyReply:
        request = VerifyRequest(name=plan.name, files=plan.manifest, staging=True, cached=checked or [])
        return self.nodes.call(target, lambda c: c.verify_model(request))

    def _record_rate(self, target: str, nbytes: int, seconds: float) -> None:
        try:
            self.rates.record(self.nodes.node_id(target), nbytes, seconds)
        except (SparkSyncError, OSError) as exc:
            log.debug("no rate recorded for %s: %s", target, exc)

    # --- moving bytes ------------------------------------------------------------------------------

    def _move(self, plan: _Plan, source: str, target: str, route: Route, staging: str, files: list[str],
              checksum: bool, landed: Callable[[int], None] | None = None) -> Moved:  # fmt: skip
        """Bytes of ``files`` from ``source`` into ``target``'s staging folder; ``landed`` hears the bytes done."""
        total = sum(f.size for f in plan.manifest if f.path in set(files))
        clock = Clock(target, source, route.kind, total, self._emit, landed=landed)
        if route.kind == "ssh":
            return self._push_files(plan, source, route, staging, files, checksum, clock)
        with self.board[source].serve(files, self.cancel, whole=True):  # a relay or a local end: the whole copy
            src_dir = self._entries[source].directory
        if route.kind == "relay":
            src_dir = str(self._relayed(plan, source, target))
            origin = src_dir
        else:
            origin = src_dir if is_local(source) else f"{self.nodes.node_id(source)}:{src_dir}"
        dest = staging if is_local(target) else f"{self.nodes.node_id(target)}:{staging}"
        return Moved(self._rsync_here(origin, dest, files, checksum, clock))

    def _push_files(self, plan: _Plan, source: str, route: Route, staging: str, files: list[str], checksum: bool,
                    clock: Clock) -> Moved:  # fmt: skip
        """The source's agent pushes ``files``: at once from a complete copy, else each batch once verified there."""
        assert route.host is not None and route.user is not None
        sizes = {f.path: f.size for f in plan.manifest}
        moved, todo, whole = Moved(), list(files), False
        while todo:
            with self.board[source].serve(todo, self.cancel, whole) as batch:
                request = PushRequest(name=plan.name, host=route.host, port=route.port, user=route.user,
                                      identity_file=route.identity_file, staging=staging, files=batch.files,
                                      checksum=checksum, from_staging=batch.from_staging)  # fmt: skip
                try:
                    literal = self._push(source, request, clock, moved.bytes)
                except CopyCancelled:
                    raise
                except SparkSyncError as exc:
                    if not batch.from_staging:
                        raise
                    # An agent without pushes from staging, or its folder gone: the rest from the whole copy.
                    log.info("%s could not pass on %s from its staging folder (%s)", source, batch.files, exc)
                    whole = True
                    continue
            log.debug("%s → %s: %s%s", source, route.host, ", ".join(batch.files),
                      " (from staging)" if batch.from_staging else "")  # fmt: skip
            moved.add(literal, sum(sizes[f] for f in batch.files), batch.files if batch.from_staging else [])
            sent = set(batch.files)
            todo = [f for f in todo if f not in sent]
        clock.tick(clock.total)
        return moved

    def _push(self, source: str, request: PushRequest, clock: Clock, offset: int = 0) -> int | None:
        job = self.nodes.call(source, lambda c: c.push_model(request))
        while True:
            if self.cancel.is_set():
                self.nodes.call(source, lambda c: c.cancel_model_job(job.id))
                raise CopyCancelled("stopped; what arrived is kept in the target's staging folder")
            asked = time.monotonic()
            # The agent answers as soon as the job ends: its end is heard at once, and the
            # progress is read only every WAIT_S, so the polls take little CPU from the copy.
            job = self.nodes.call(source, lambda c: c.model_job(job.id, wait_s=WAIT_S))
            clock.tick(offset + job.bytes_done)
            if job.state.finished:
                break
            time.sleep(max(0.0, POLL_S - (time.monotonic() - asked)))  # an agent that does not wait
        if job.state.value != "done":
            raise CopyFailedError(job.message or f"the copy from {source} ended {job.state.value}")
        clock.tick(offset + job.bytes_total)
        return job.literal_bytes

    def _relayed(self, plan: _Plan, source: str, target: str) -> Path:
        """The model on this computer (fetched once from the source), to go on to the target."""
        with self._relay_lock:
            folder = self._relay.get(plan.name)
            if folder is None:
                folder = ensure_dir(data_dir() / "models-relay" / plan.name.replace("/", "--"))
                clock = Clock(target, source, "relay", plan.entry.size_bytes, self._emit, phase="relaying")
                origin = f"{self.nodes.node_id(source)}:{self._entries[source].directory}"
                self._rsync_here(origin, str(folder), [f.path for f in plan.manifest], False, clock)
                self._relay[plan.name] = folder
            return folder

    def _drop_relay(self) -> None:
        for folder in self._relay.values():
            shutil.rmtree(folder, ignore_errors=True)
        self._relay.clear()

    def _rsync_here(self, source: str, dest: str, files: list[str], checksum: bool, clock: Clock) -> int | None:
        """rsync run on this computer; a remote end goes through SparkSync's own SSH (``rsh``)."""
        remote = ":" in source.split("/", 1)[0] or ":" in dest.split("/", 1)[0]
        argv = rsync_argv(source, dest, rsh=rsh.command() if remote else None, checksum=checksum)
        def started(proc: subprocess.Popen) -> None:
            threading.Thread(target=self._stop_on_cancel, args=(proc,), daemon=True).start()

        try:
            done = run_rsync(argv, files, lambda progress: clock.tick(progress.bytes_done), started)
        except FileNotFoundError as exc:
            raise ModelError("rsync is not installed on this computer (Debian: apt install rsync)") from exc
        if self.cancel.is_set():
            raise CopyCancelled("stopped; what arrived is kept in the target's staging folder")
        if done.returncode != 0:
            raise CopyFailedError(f"rsync failed ({done.returncode}): {done.stderr_tail or 'no message'}")
        clock.tick(clock.total)
        return done.progress.literal_bytes

    def _stop_on_cancel(self, proc: subprocess.Popen) -> None:
        while proc.poll() is None:
            if self.cancel.wait(0.2):
                try:
                    proc.send_signal(signal.SIGTERM)  # rsync keeps the partial file (--partial)
                except ProcessLookupError:
                    pass
                return

    def _emit(self, event: CopyEvent) -> None:
        try:
            self.on_event(event)
        except Exception:  # a face's bug must not stop a copy
            log.exception("a copy progress listener failed")


def _present(listing: ModelList | SparkSyncError | None, name: str) -> ModelEntry | None:
    if listing is None or isinstance(listing, SparkSyncError):
        return None
    found = [m for m in listing.models if m.name == name and m.state is ModelState.present]
    found.sort(key=lambda m: m.root_kind is not RootKind.store)
    return found[0] if found else None


def _first_with(name: str, listings: dict[str, ModelList | SparkSyncError], exclude: list[str]) -> str | None:
    have = [n for n in listings if n not in exclude and _present(listings[n], name) is not None]
    paired = [n for n in have if n != LOCAL_NODE_NAME]
    found = paired or have
    return found[0] if found else None


def _size(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"
