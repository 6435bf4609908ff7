"""The fan-out's schedule with fake copies: pipelined, never ahead of the source's checks, a lost source requeued.

Each fake copy takes the source's files batch by batch through ``Supply.serve``
(what ``ModelCopy`` does with pushes), and "verifies" each file on the target
after it arrived, as the target's early sha256 check does. A log records, in
order, every file a node verified and every batch it served.
"""

from __future__ import annotations

import threading
import time

import pytest

from sparksync.core.models.errors import CopyCancelled
from sparksync.core.models.fanout import COMPLETE, FAILED, Board, FanOut, Requeue, SourceLost

FILES = ["a", "b", "c", "d"]


class World:
    def __init__(self, board: Board, fail_after: dict[str, int] | None = None, step_s: float = 0.02):
        self.board, self.fail_after, self.step_s = board, fail_after or {}, step_s
        self.cancel = threading.Event()
        self.log: list[tuple] = []
        self.lock = threading.Lock()

    def note(self, *event) -> None:
        with self.lock:
            self.log.append(event)

    def copy_one(self, source: str, target: str):
        supply = self.board[target]
        todo = [f for f in FILES if f not in supply.verified]
        self.note("start", source, target)
        try:
            while todo:
                with self.board[source].serve(todo, self.cancel) as batch:
                    self.note("served", source, target, tuple(batch.files), batch.from_staging)
                    for name in batch.files:  # they land one after the other, each checked once landed
                        time.sleep(self.step_s)
                        if self.cancel.is_set():  # as a push does: stopped mid-way
                            raise CopyCancelled("stopped")
                        self.note("verified", target, name)  # noted before the supply hears it
                        supply.verified_files([name])
                        if len(supply.verified) == self.fail_after.get(target):
                            time.sleep(10 * self.step_s)  # long enough for another node to take it as a source
                            self.note("failed", target)
                            supply.finish(False)
                            return "failed"
                todo = [f for f in todo if f not in batch.files]
        except SourceLost as exc:
            self.note("lost", target, source)
            return Requeue(source, str(exc))
        except CopyCancelled:
            supply.finish(False)
            return "cancelled"
        self.note("sent", source, target)
        self.board.give_back(source, target)  # as ModelCopy does: before the target's own check
        time.sleep(self.step_s)
        supply.finalizing(self.cancel)
        self.note("finished", target)
        supply.finish(True)
        return "ok"


def fan_out(world: World, targets: list[str]) -> dict[str, str]:
    return FanOut(world.board, world.copy_one, lambda target, why: "not started", world.cancel).run(targets)


def board_with(source: str, targets: list[str]) -> Board:
    board = Board()
    board.add(source, complete=True)
    for target in targets:
        board.add(target)
    return board


def test_a_node_serves_each_file_only_after_it_verified_it_and_before_its_own_copy_ended():
    targets = [f"n{i}" for i in range(2, 9)]
    world = World(board_with("n1", targets))
    results = fan_out(world, targets)
    assert results == {t: "ok" for t in targets}
    verified_at = {(e[1], e[2]): i for i, e in enumerate(world.log) if e[0] == "verified"}
    finished_at = {e[1]: i for i, e in enumerate(world.log) if e[0] == "finished"}
    early = []
    for i, event in enumerate(world.log):
        if event[0] != "served":
            continue
        _, source, target, files, from_staging = event
        if source == "n1":
            assert not from_staging  # the first source's copy is complete: everything it lacks at once
            continue
        for name in files:
            assert verified_at[(source, name)] < i, (source, name, world.log)
        if from_staging:
            assert i < finished_at[source]
            early.append((source, target))
    # Pipelined: most nodes passed files on while they still received, not only after.
    assert len({source for source, _target in early}) >= 3, world.log
    # Each source served one copy at a time, though it was handed back before each target's own end.
    serving: dict[str, str] = {}
    for event in world.log:
        if event[0] == "start":
            assert event[1] not in serving, (event, serving)
            serving[event[1]] = event[2]
        elif event[0] == "sent":
            assert serving.pop(event[1]) == event[2]
    # Every target got every file once.
    for target in targets:
        assert sorted(n for e in world.log if e[0] == "verified" and e[1] == target for n in [e[2]]) == FILES


def test_a_source_failing_midway_sends_its_downstream_back_to_the_queue_not_to_failure():
    targets = ["n2", "n3", "n4"]
    world = World(board_with("n1", targets), fail_after={"n2": 1})
    results = fan_out(world, targets)
    assert results == {"n2": "failed", "n3": "ok", "n4": "ok"}
    lost = [e for e in world.log if e[0] == "lost"]
    assert lost, world.log  # someone was being served by n2 when it failed
    for _, target, source in lost:
        assert source == "n2"
        # It finished from another source, keeping the files it already had (none served twice).
        served = [e for e in world.log if e[0] == "served" and e[2] == target]
        assert served[-1][1] != "n2"
        names = [n for e in served for n in e[3]]
        assert sorted(names) == FILES, served
    assert world.board["n2"].state == FAILED
    assert all(world.board[t].state == COMPLETE for t in ("n3", "n4"))


def test_a_node_never_serves_one_it_is_fed_by():
    board = board_with("n1", ["a", "b", "c"])
    board["a"].upstream, board["b"].upstream, board["c"].upstream = "n1", "a", "b"
    assert board.waits_on("c", "a") and board.waits_on("b", "a")
    assert not board.waits_on("a", "c") and not board.waits_on("n1", "a")
    for node in ("a", "b", "c"):
        board[node].verified_files(["a"])
    fan = FanOut(board, lambda s, t: "ok", lambda t, why: why, threading.Event())
    # a (back in the queue after losing n1, say) may take n1, never b or c, which wait on its files.
    board.lend("n1", "x")
    assert fan._pick("a", avoid=set()) is None
    assert fan._pick("c", avoid=set()) == "a"
    board.give_back("n1", "y")  # not the copy it serves: still busy
    assert fan._pick("a", avoid=set()) is None
    board.give_back("n1", "x")
    assert fan._pick("a", avoid=set()) == "n1"


def test_the_move_into_place_waits_for_a_push_from_staging_and_later_ones_get_the_complete_copy():
    board = board_with("n1", ["n2"])
    supply, cancel = board["n2"], threading.Event()
    supply.verified_files(["a", "b"])
    order: list[str] = []
    holding, release = threading.Event(), threading.Event()

    def reader() -> None:
        with supply.serve(["a", "b", "c"], cancel) as batch:
            assert batch.from_staging and batch.files == ["a", "b"]
            holding.set()
            release.wait(5)
            order.append("push from staging ended")

    thread = threading.Thread(target=reader)
    thread.start()
    assert holding.wait(5)

    def finalize() -> None:
        supply.finalizing(cancel)
        order.append("finalizing")
        supply.verified_files(FILES)
        supply.finish(True)

    mover = threading.Thread(target=finalize)
    mover.start()
    mover.join(0.3)
    assert order == []  # still held by the push
    release.set()
    thread.join(5)
    mover.join(5)
    assert order == ["push from staging ended", "finalizing"]
    with supply.serve(["c", "d"], cancel) as batch:
        assert batch.files == ["c", "d"] and not batch.from_staging


def test_a_stopped_run_stops_the_copies_waiting_on_a_source_and_starts_no_more():
    targets = ["n2", "n3", "n4"]
    world = World(board_with("n1", targets), step_s=0.2)
    timer = threading.Timer(0.3, world.cancel.set)
    timer.start()
    results = fan_out(world, targets)
    timer.join()
    assert set(results) == set(targets)
    assert set(results.values()) <= {"cancelled", "not started"}, results  # 4 files at 0.2 s: none ends by 0.3 s
    assert not [e for e in world.log if e[0] == "served" and e[1] != "n1" and e[2] not in ("n2", "n3")]


def test_a_failed_source_raises_source_lost_even_for_a_file_it_verified():
    board = board_with("n1", ["n2"])
    board["n2"].verified_files(["a"])
    board["n2"].finish(False)
    with pytest.raises(SourceLost), board["n2"].serve(["a"], threading.Event()):
        pass
