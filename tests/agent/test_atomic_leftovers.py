"""Writers killed mid-write (kill -9) leave temp files; the next write and the next start remove them."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from sparksync_agent.atomic import ORPHAN_AGE_S, remove_stale_temps, write_atomic

REPO = Path(__file__).resolve().parents[2]
KILLS = 40

# Rewrites the registry file as fast as it can, with enough bytes that a kill lands mid-write often.
WRITER = """
import sys
from pathlib import Path
from sparksync_agent.atomic import write_atomic
path = Path(sys.argv[1])
data = b"x" * (4 << 20)
print("writing", flush=True)
while True:
    write_atomic(path, data)
"""


def _temps(directory: Path) -> list[Path]:
    return sorted(directory.glob(".*.tmp"))


def _kill_writers(target: Path, kills: int) -> list[int]:
    """Start and kill -9 a writer ``kills`` times; how many temp files lay there after each kill.

    Each writer's first write removes what the one before it left, so the
    counts never grow past the one file the last victim was writing.
    """
    rng = random.Random(18)
    counts = []
    for _ in range(kills):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, cwd=REPO)
        assert writer.stdout.readline() == b"writing\n"
        time.sleep(rng.uniform(0.0, 0.05))
        writer.send_signal(signal.SIGKILL)
        writer.wait(10)
        writer.stdout.close()
        counts.append(len(_temps(target.parent)))
    return counts


def test_temps_of_killed_writers_are_removed_by_the_next_write(tmp_path):
    target = tmp_path / "nodes.json"
    counts = _kill_writers(target, KILLS)
    print(f"{KILLS} writers killed with SIGKILL: {sum(c > 0 for c in counts)} left a temp file")
    assert any(counts), "no kill landed mid-write: the test proved nothing"
    assert max(counts) == 1, counts  # never more than the last victim's: the next write removed the rest

    write_atomic(target, b"{}")
    assert _temps(tmp_path) == []
    assert target.read_bytes() == b"{}"


def test_the_cli_removes_them_when_it_starts(tmp_path):
    home = Path(os.environ["SPARKSYNC_HOME"])
    config = home / "config"
    config.mkdir(parents=True, exist_ok=True)
    for _ in range(5):  # until the last victim left its temp file behind
        if _kill_writers(config / "nodes.json", 10)[-1]:
            break
    assert _temps(config), "no kill landed mid-write: the test proved nothing"

    listed = subprocess.run([sys.executable, "-m", "sparksync", "node", "list", "--json"], capture_output=True,
                            text=True, timeout=120, cwd=REPO)  # fmt: skip
    assert listed.returncode in (0, 1), listed.stderr  # a half-written registry is reported, never used
    assert _temps(config) == []


def test_a_write_in_progress_and_a_foreign_temp_are_left_alone(tmp_path):
    target = tmp_path / "state.json"
    # A live writer of this machine: this test's own parent process, say.
    live = tmp_path / f".state.json.{os.getppid()}@{_host_tag()}.abc123.tmp"
    live.write_bytes(b"partial")
    # One of another machine (a shared home), and one of an older version without an owner: young, kept.
    foreign = tmp_path / ".state.json.4242@00000000.abc123.tmp"
    foreign.write_bytes(b"partial")
    unowned = tmp_path / ".state.json.k2j3h4.tmp"
    unowned.write_bytes(b"partial")
    # The same, but older than the orphan age: removed.
    old_foreign = tmp_path / ".state.json.4243@00000000.def456.tmp"
    old_foreign.write_bytes(b"partial")
    old = time.time() - ORPHAN_AGE_S - 60
    os.utime(old_foreign, (old, old))

    write_atomic(target, b"{}")
    assert set(_temps(tmp_path)) == {live, foreign, unowned}
    assert remove_stale_temps(tmp_path) == 0


def _host_tag() -> str:
    import hashlib
    import socket

    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
