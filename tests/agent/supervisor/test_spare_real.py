"""The spare keeper: ranks forked from it keep every guarantee; without it ranks still start.

A real agent starts a spare keeper (named ``sparksync-spare``) when it
starts; the ``supervised`` fixture waits for it, so ranks in every test of
this directory take the forked path. These check the forked keeper itself,
and the fallback when the spare is gone.
"""

from __future__ import annotations

import os
import signal

import psutil

from sparksync_agent.protocol import RankState
from tests.agent.supervisor.conftest import pid_gone, wait_until
from tests.agent.supervisor.test_supervisor_real import launch, log_texts, rank_of, wait_log, wait_state


def command_of(keeper: int) -> psutil.Process:
    return wait_until(lambda: psutil.Process(keeper).children(), "the keeper to start the command")[0]


def test_a_keeper_forked_from_the_spare_runs_logs_and_records_the_exit(supervised, tmp_path):
    client, spare = supervised.client, supervised.spare()
    flag = tmp_path / "flag"
    script = f"import os, time\nprint('up')\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.05)\nraise SystemExit(3)"
    client.start_rank("forked", launch(script))
    status = wait_state(client, "forked", RankState.ready)
    keeper = psutil.Process(status.pid)
    assert keeper.ppid() == spare.pid  # forked, not started afresh
    assert os.getsid(keeper.pid) == keeper.pid and os.getpgid(keeper.pid) == keeper.pid  # its own session
    command = command_of(keeper.pid)
    assert os.getpgid(command.pid) == keeper.pid  # the command runs in the keeper's group
    assert keeper.cwd() == os.path.realpath(supervised.state_dir / "workloads" / "forked" / "g.0.py")
    wait_log(client, "forked", "up")  # through the keeper's pipe into the log file

    flag.touch()
    ended = wait_state(client, "forked", RankState.failed)
    assert ended.exit_code == 3 and "exited with status 3" in ended.message  # exit.json, from the keeper
    wait_until(lambda: pid_gone(keeper.pid), "the keeper to exit")
    assert spare.is_running() and supervised.spare().pid == spare.pid  # the spare stays for the next rank


def test_a_forked_keeper_outlives_the_agent_and_its_spare_then_is_re_attached(supervised):
    client, spare = supervised.client, supervised.spare()
    client.start_rank(
        "lasting", launch("import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.2)")
    )
    status = wait_state(client, "lasting", RankState.ready)
    command = command_of(status.pid)

    supervised.stop()
    wait_until(lambda: pid_gone(spare.pid), "the spare to end with the agent")
    assert not pid_gone(status.pid) and not pid_gone(command.pid)
    client = supervised.start()
    again = rank_of(client, "lasting")
    assert again.state is RankState.ready and again.pid == status.pid and again.attempt == 1
    assert client.stop_workload("lasting", grace_s=3.0).ranks[0].state is RankState.stopped
    wait_until(lambda: pid_gone(status.pid) and pid_gone(command.pid), "the rank to be gone")


def test_without_the_spare_a_rank_starts_afresh_and_a_new_spare_follows(supervised):
    client, spare = supervised.client, supervised.spare()
    os.kill(spare.pid, signal.SIGKILL)
    wait_until(lambda: pid_gone(spare.pid), "the spare to be gone")

    client.start_rank("fresh", launch("import time\nprint('up', flush=True)\ntime.sleep(60)"))
    status = wait_state(client, "fresh", RankState.ready)
    assert psutil.Process(status.pid).ppid() == supervised.agent.proc.pid  # the agent started it itself
    wait_log(client, "fresh", "up")
    assert "up" in log_texts(client, "fresh")
    assert supervised.spare().pid != spare.pid  # a new spare for the next rank
    assert client.stop_workload("fresh", grace_s=3.0).ranks[0].state is RankState.stopped


def test_the_spare_ends_when_the_agent_is_killed_outright(supervised):
    spare = supervised.spare()
    supervised.client.close()
    supervised.client = None
    supervised.agent.proc.kill()  # no clean shutdown: the spare sees EOF on its pipe
    supervised.agent.proc.wait()
    wait_until(lambda: pid_gone(spare.pid), "the spare to end after the agent")
