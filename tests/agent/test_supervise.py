"""``sparksync-agent supervise``: a real supervisor with a real agent child, restarted and stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from sparksync_agent.supervise import Backoff, rotate_log

TIMEOUT_S = 30.0


def wait_for(predicate, what: str, timeout: float = TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def test_backoff_doubles_up_to_its_cap():
    backoff = Backoff(first_s=0.5, max_s=4.0)
    assert [backoff.delay(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_a_big_log_is_rotated_once(tmp_path):
    log = tmp_path / "agent.log"
    log.write_bytes(b"x" * 100)
    rotate_log(log, limit=50)
    assert not log.exists() and (tmp_path / "agent.log.1").stat().st_size == 100
    rotate_log(log, limit=50)  # nothing to rotate: no error


def test_supervisor_restarts_a_killed_agent_and_sigterm_stops_both(tmp_path):
    pid_file, log_file, state_file = tmp_path / "supervise.pid", tmp_path / "agent.log", tmp_path / "s.json"
    state_dir = tmp_path / "state"
    argv = [sys.executable, "-m", "sparksync_agent", "supervise", "--pid-file", str(pid_file)]
    argv += ["--log-file", str(log_file), "--state-file", str(state_file), "--state-dir", str(state_dir)]
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: pid_file.exists() and int(pid_file.read_text()) == proc.pid, "the pid file")
        first = wait_for(lambda: read_json(state_dir / "endpoint.json"), "the agent's endpoint")
        assert psutil.Process(first["pid"]).parent().pid == proc.pid  # the agent is the supervisor's child

        os.kill(first["pid"], signal.SIGKILL)  # a crash
        second = wait_for(
            lambda: (e := read_json(state_dir / "endpoint.json")) and e["pid"] != first["pid"] and e,
            "a restarted agent",
        )
        state = read_json(state_file)
        assert (
            state["starts"] == 2
            and state["last_exit"] == -signal.SIGKILL
            and state["child_pid"] == second["pid"]
        )

        # A second supervisor for the same pid file refuses to start.
        other = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
        assert other.returncode == 2 and f"already runs as pid {proc.pid}" in other.stderr

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=TIMEOUT_S) == 0
        assert (
            not psutil.pid_exists(second["pid"])
            or psutil.Process(second["pid"]).status() == psutil.STATUS_ZOMBIE
        )
        assert not pid_file.exists()
        log = log_file.read_text()
        assert "agent exited with status -9; restarting in 0.5 s" in log and "supervisor stopped" in log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_supervisor_killed_outright_takes_its_agent_with_it(tmp_path):
    pid_file, state_dir = tmp_path / "supervise.pid", tmp_path / "state"
    argv = [sys.executable, "-m", "sparksync_agent", "supervise", "--pid-file", str(pid_file)]
    argv += ["--log-file", str(tmp_path / "agent.log"), "--state-dir", str(state_dir)]
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        agent = wait_for(lambda: read_json(state_dir / "endpoint.json"), "the agent's endpoint")
        child = psutil.Process(agent["pid"])
        proc.kill()
        proc.wait()
        # The agent watches its --parent-pid and stops by itself.
        wait_for(
            lambda: not child.is_running() or child.status() == psutil.STATUS_ZOMBIE,
            "the orphan agent stopping",
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
