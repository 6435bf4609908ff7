"""Process identity by pid plus start time, so a reused pid is never mistaken for a rank."""

from __future__ import annotations

import os
import subprocess
import sys

from sparksync_agent.supervisor.procid import same_process, start_ticks


def test_a_live_process_matches_its_own_start_time_only():
    ticks = start_ticks(os.getpid())
    assert ticks is not None and ticks > 0
    assert same_process(os.getpid(), ticks)
    assert not same_process(os.getpid(), ticks + 1)  # same pid, another start: a reused pid


def test_an_ended_process_matches_nothing(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = start_ticks(proc.pid)
    proc.wait()
    assert start_ticks(proc.pid) is None and not same_process(proc.pid, ticks or 0)


def test_a_command_name_with_spaces_and_parentheses_is_parsed(tmp_path):
    proc_root = tmp_path / "proc"
    (proc_root / "42").mkdir(parents=True)
    fields = ["S"] + ["0"] * 18 + ["12345"] + ["0"] * 10
    (proc_root / "42" / "stat").write_text("42 (my (odd) name) " + " ".join(fields) + "\n")
    assert start_ticks(42, proc_root) == 12345
    (proc_root / "42" / "stat").write_text("42 (zombie) Z " + " ".join(fields[1:]) + "\n")
    assert start_ticks(42, proc_root) is None
