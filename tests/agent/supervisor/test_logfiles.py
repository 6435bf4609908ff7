"""The keeper's rotating log and the agent's reader: every line keeps its number across rotations."""

from __future__ import annotations

import subprocess
import sys

from sparksync_agent.protocol import RankLaunch, RankState, ReadinessProbe
from sparksync_agent.supervisor.files import KEEPER_FILE, KeeperSpec, read_exit, write_json
from sparksync_agent.supervisor.logring import LogRing
from sparksync_agent.supervisor.logtail import LogTail
from sparksync_agent.supervisor.records import RankRecord, Store

LINES = 3000


def run_keeper(rank_dir, argv, max_bytes=4096, backups=100) -> None:
    rank_dir.mkdir(exist_ok=True)
    write_json(rank_dir / KEEPER_FILE, KeeperSpec(argv=argv, max_bytes=max_bytes, backups=backups))
    keeper = [sys.executable, "-m", "sparksync_agent.supervisor.keeper", str(rank_dir)]
    subprocess.run(keeper, check=True, timeout=120)


def printer(count: int) -> list[str]:
    """Numbered lines, padded so the output spans many 4 KiB log files."""
    return [sys.executable, "-c", f"for i in range({count}): print('line', i + 1, 'x' * 90, flush=True)"]


def number(text: str) -> int:
    return int(text.split()[1])


def test_lines_keep_their_numbers_across_rotations_and_a_late_reader_starts_at_the_right_one(tmp_path):
    rank_dir = tmp_path / "rank"
    run_keeper(rank_dir, printer(LINES))

    rotated = sorted(rank_dir.glob("output.log.*"))
    assert len(rotated) >= 4, "the log should have rotated several times"
    assert read_exit(rank_dir).exit_code == 0

    # A reader that attaches now sees only the current file, numbered from where it starts.
    lines = LogTail(rank_dir).read()
    assert lines[0][0] > 1 and lines[-1] == (LINES + 1, "[sparksync-agent] the command ended: exit status 0")
    assert all(number(text) == seq for seq, text in lines[:-1])

    # A second run of the command (a restart) continues the numbering in the same log.
    run_keeper(rank_dir, printer(10))
    tail = LogTail(rank_dir)
    again = [t for t in tail.read() if t[1].startswith("line ")]
    keeper_lines = 1  # the keeper's own note after the first run ("the command ended: ...")
    assert again[-1][0] == LINES + keeper_lines + 10 and number(again[-1][1]) == 10


def test_a_reader_following_the_writer_misses_no_line(tmp_path):
    rank_dir = tmp_path / "rank"
    rank_dir.mkdir()
    write_json(rank_dir / KEEPER_FILE, KeeperSpec(argv=printer(LINES), max_bytes=4096, backups=100))
    keeper = subprocess.Popen([sys.executable, "-m", "sparksync_agent.supervisor.keeper", str(rank_dir)])
    tail, seen = LogTail(rank_dir), []
    while keeper.poll() is None:
        seen += tail.read()
    keeper.wait()
    seen += tail.read()
    assert [seq for seq, _ in seen] == list(range(1, len(seen) + 1))
    assert [number(text) for _, text in seen[:LINES]] == list(range(1, LINES + 1))


def test_the_ring_pages_by_sequence_number_and_counts_lines_it_no_longer_holds():
    ring = LogRing(capacity=3)
    for seq in range(1, 6):
        ring.append(seq, f"l{seq}")
    assert ring.since(0) == ([(3, "l3"), (4, "l4"), (5, "l5")], 2)
    assert ring.since(3) == ([(4, "l4"), (5, "l5")], 0)
    assert ring.since(4, limit=5) == ([(5, "l5")], 0)
    assert ring.since(5) == ([], 0)
    ring.skip_to(100)
    assert ring.since(5) == ([], 95) and ring.first_seq == 101


def test_workload_state_is_a_versioned_file_and_an_unreadable_one_is_set_aside(tmp_path):
    store = Store(tmp_path / "workloads" / "workloads.json")
    launch = RankLaunch(
        group="g",
        node="n",
        rank=0,
        role="r",
        argv=["x"],
        readiness=ReadinessProbe(kind="process"),
        log_name="l",
    )
    record = RankRecord(workload_id="w", launch=launch, state=RankState.ready, keeper_pid=42, keeper_ticks=7)
    store.save([record])
    assert store.load() == [record]
    assert '"version": 1' in store.path.read_text() and oct(store.path.stat().st_mode)[-3:] == "600"
    store.path.write_text("{not json")
    assert store.load() == []
    assert len(list(store.path.parent.glob("workloads.json.unreadable-*"))) == 1
