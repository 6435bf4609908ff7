"""Workloads survive an agent restart: running ranks are re-attached, dead ones reported, nothing starts twice."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from sparksync_agent.protocol import RankState
from tests.agent.supervisor.conftest import pid_gone, wait_until
from tests.agent.supervisor.test_supervisor_real import launch, rank_of, wait_log, wait_state

pytestmark = pytest.mark.slow

TICKER = (
    "import time\ni = 0\nwhile True:\n    i += 1\n    print('tick', i, flush=True)\n    time.sleep(0.1)\n"
)


def _command_pid(keeper: int) -> int:
    """The keeper's one child: the rank's command (the keeper may still be starting it)."""
    return wait_until(lambda: psutil.Process(keeper).children(), "the keeper to start the command")[0].pid


def _tick_offsets(client, workload_id: str) -> set[int]:
    """seq - tick number for every held line: one value when numbering is stable."""
    return {
        line.seq - int(line.text.split()[1])
        for line in client.logs(workload_id).lines
        if line.text.startswith("tick")
    }


def test_an_agent_restart_reattaches_running_ranks_and_reports_the_ones_that_ended(supervised, tmp_path):
    client = supervised.client
    flag = tmp_path / "exit-now"
    client.start_rank("live", launch(TICKER))
    client.start_rank("exits", launch(
        f"import os, sys, time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.05)\nprint('bye', flush=True)\nsys.exit(7)"
    ))  # fmt: skip
    client.start_rank("killed", launch("import time; print('up', flush=True); time.sleep(600)"))
    for workload in ("live", "exits", "killed"):
        wait_state(client, workload, RankState.ready)
    wait_log(client, "live", "tick 5")
    wait_log(client, "killed", "up")
    live, killed = rank_of(client, "live"), rank_of(client, "killed")
    live_command = _command_pid(live.pid)
    killed_command = _command_pid(killed.pid)

    supervised.stop()  # the agent goes; its ranks do not
    assert not pid_gone(live.pid) and not pid_gone(live_command)
    flag.touch()  # 'exits' ends with status 7 while no agent watches
    os.kill(killed_command, signal.SIGKILL)  # 'killed' dies by a signal meanwhile
    wait_until(lambda: pid_gone(killed_command), "the killed command to be gone")
    wait_until(lambda: pid_gone(killed.pid), "its keeper to record the end and exit")
    client = supervised.start()

    again = rank_of(client, "live")
    assert again.state is RankState.ready and again.attempt == 1
    assert again.pid == live.pid and _command_pid(again.pid) == live_command  # re-attached, not started again
    keepers = [p for p in supervised.keeper_pids() if psutil.Process(p).cwd().endswith("live/g.0.py")]
    assert keepers == [live.pid]

    exits = rank_of(client, "exits")
    assert (
        exits.state is RankState.failed and exits.exit_code == 7 and "exited with status 7" in exits.message
    )
    assert "bye" in exits.last_lines
    dead = rank_of(client, "killed")
    assert dead.state is RankState.failed and dead.exit_signal == signal.SIGKILL and "SIGKILL" in dead.message

    # The log goes on with the same numbering: lines written while no agent watched are there too.
    before = rank_of(client, "live").log_last_seq
    wait_until(lambda: rank_of(client, "live").log_last_seq > before + 3, "new lines after the restart")
    assert len(_tick_offsets(client, "live")) == 1

    assert client.stop_workload("live", grace_s=3.0).ranks[0].state is RankState.stopped
    wait_until(lambda: pid_gone(live.pid) and pid_gone(live_command), "the re-attached rank to be gone")


def test_a_rank_lost_without_an_exit_status_is_reported_as_lost(supervised):
    client = supervised.client
    client.start_rank("vanish", launch("import time; time.sleep(600)"))
    keeper = wait_state(client, "vanish", RankState.ready).pid
    command = _command_pid(keeper)
    supervised.stop()
    # Killing the keeper outright leaves no exit record (its command follows it: parent-death signal).
    os.kill(keeper, signal.SIGKILL)
    wait_until(lambda: pid_gone(keeper) and pid_gone(command), "the keeper and its command to be gone")

    client = supervised.start()

    status = rank_of(client, "vanish")
    assert status.state is RankState.lost and "exit status is unknown" in status.message
