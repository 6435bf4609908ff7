"""The supervisor through a real agent process: start, readiness, logs, stop, orphans, restarts, errors."""

from __future__ import annotations

import os
import signal
import socket

import psutil
import pytest

from sparksync.core.agents.client import LogGap
from sparksync.core.base.errors import AgentRequestError
from sparksync_agent.protocol import LogLine, RankLaunch, RankState, RankStatus
from tests.agent.supervisor.conftest import pid_gone, python_rank, wait_until

pytestmark = pytest.mark.slow


def launch(script: str, **kw) -> RankLaunch:
    return RankLaunch.model_validate(python_rank(script, **kw))


def rank_of(client, workload_id: str) -> RankStatus:
    return client.workload(workload_id).ranks[0]


def wait_state(client, workload_id: str, *states: RankState, timeout: float = 60.0) -> RankStatus:
    def reached():
        status = rank_of(client, workload_id)
        return status if status.state in states else None

    return wait_until(reached, f"{workload_id} to be {'/'.join(s.value for s in states)}", timeout)


def log_texts(client, workload_id: str) -> list[str]:
    return [line.text for line in client.logs(workload_id).lines]


def wait_log(client, workload_id: str, needle: str) -> list[str]:
    return wait_until(
        lambda: [t for t in log_texts(client, workload_id) if needle in t], f"'{needle}' in the log"
    )


ORPHAN_MAKER = r"""
import os, signal, subprocess, sys, time
def spawn(code):
    return subprocess.Popen([sys.executable, "-c", code]).pid
sleeper = spawn("import time; time.sleep(600)")
stubborn = spawn("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('stubborn ready', flush=True); time.sleep(600)")
escaper = spawn("import os, time; os.setsid(); print('escaped', os.getpid(), flush=True); time.sleep(600)")
middle = os.fork()
if middle == 0:
    if os.fork() == 0:
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print('daemon', os.getpid(), flush=True)
        time.sleep(600)
    os._exit(0)
os.waitpid(middle, 0)
print('pids', sleeper, stubborn, escaper, flush=True)
time.sleep(600)
"""


def _tree_pids(client, workload_id: str) -> list[int]:
    """Every process of the rank: the keeper, the command and all they started."""
    wait_log(client, workload_id, "stubborn ready")
    wait_log(client, workload_id, "daemon")
    wait_log(client, workload_id, "escaped")
    texts = wait_log(client, workload_id, "pids")
    keeper = rank_of(client, workload_id).pid
    named = [int(p) for p in texts[0].split()[1:]]
    named.append(int(wait_log(client, workload_id, "daemon")[0].split()[1]))
    tree = [keeper, *(p.pid for p in psutil.Process(keeper).children(recursive=True))]
    assert set(named) <= set(tree), "the double-forked daemon must land under the keeper (subreaper)"
    return tree


def test_stop_leaves_no_process_behind_even_grandchildren_that_ignore_sigterm_or_leave_the_group(supervised):
    client = supervised.client
    client.start_rank("orphans", launch(ORPHAN_MAKER))
    wait_state(client, "orphans", RankState.ready)
    tree = _tree_pids(client, "orphans")
    assert len(tree) >= 6  # keeper, command, sleeper, stubborn, escaper, daemon

    status = client.stop_workload("orphans", grace_s=2.0).ranks[0]

    assert status.state is RankState.stopped and status.pid is None
    wait_until(lambda: all(pid_gone(p) for p in tree), "every process of the rank to be gone", timeout=30)


def test_a_command_that_ends_by_itself_takes_its_stray_children_with_it(supervised):
    client = supervised.client
    # The command exits 0 as soon as its child has set itself to ignore SIGTERM.
    script = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-u', '-c', \"import signal, time; signal.signal(signal.SIGTERM, "
        "signal.SIG_IGN); print('stray', flush=True); time.sleep(600)\"], stdout=subprocess.PIPE)\n"
        "print(p.stdout.readline().decode().strip(), p.pid, flush=True)\n"
    )
    client.start_rank("strays", launch(script))
    stray = int(wait_log(client, "strays", "stray")[0].split()[1])
    status = wait_state(client, "strays", RankState.exited)
    assert status.exit_code == 0 and status.message is None
    wait_until(lambda: pid_gone(stray), "the stray grandchild to be gone", timeout=30)


def test_a_failing_rank_is_restarted_with_backoff_then_given_up(supervised):
    client = supervised.client
    policy = {"mode": "on-failure", "max_failures": 3, "window_s": 120, "backoff_s": 0.2, "backoff_max_s": 1}
    client.start_rank("crashy", launch("print('boom', flush=True); raise SystemExit(3)", restart=policy))

    status = wait_state(client, "crashy", RankState.failed)
    wait_until(
        lambda: rank_of(client, "crashy").message and "gave up" in rank_of(client, "crashy").message,
        "give-up",
    )
    status = rank_of(client, "crashy")

    assert status.attempt == 3 and status.exit_code == 3
    assert "exited with status 3" in status.message and "gave up after 3 failures" in status.message
    assert "boom" in status.last_lines
    lines = client.logs("crashy").lines
    booms = [line.seq for line in lines if line.text == "boom"]
    assert len(booms) == 3 and booms == sorted(booms) and len({line.seq for line in lines}) == len(lines)


def test_a_rank_that_fails_once_recovers_on_restart(supervised, tmp_path):
    flag = tmp_path / "second-time"
    script = (
        "import os, sys, time\n"
        f"flag = {str(flag)!r}\n"
        "if not os.path.exists(flag):\n"
        "    open(flag, 'w').close(); print('first try fails', flush=True); sys.exit(1)\n"
        "print('serving', flush=True); time.sleep(600)\n"
    )
    ready = {"kind": "log", "pattern": "^serving$"}
    client = supervised.client
    client.start_rank(
        "flaky", launch(script, readiness=ready, restart={"mode": "on-failure", "backoff_s": 0.1})
    )
    status = wait_state(client, "flaky", RankState.ready)
    assert status.attempt == 2 and status.ready_at is not None


def test_a_rank_never_ready_fails_with_its_last_lines(supervised):
    client = supervised.client
    never = {"kind": "log", "pattern": "never printed", "timeout_s": 2}
    client.start_rank(
        "slow", launch("import time; print('loading...', flush=True); time.sleep(600)", readiness=never)
    )
    status = wait_state(client, "slow", RankState.failed)
    assert "not ready after 2 s" in status.message and "loading..." in status.last_lines


def test_a_taken_port_is_a_clear_error_and_nothing_starts(supervised):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(AgentRequestError) as info:
            supervised.client.start_rank("ported", launch("import time; time.sleep(600)", ports=[port]))
    assert info.value.status == 409 and info.value.code == "port_in_use"
    assert f"port {port}" in str(info.value) and "already in use" in str(info.value)
    assert supervised.client.workloads().workloads == []


def test_bad_requests_get_clear_errors(supervised):
    client = supervised.client
    with pytest.raises(AgentRequestError) as info:
        client.start_rank("w", RankLaunch.model_validate(python_rank("pass", argv=["no-such-engine-binary"])))
    assert info.value.status == 400 and info.value.code == "command_not_found"
    with pytest.raises(AgentRequestError) as info:
        client.start_rank("../escape", launch("pass"))
    assert info.value.status == 422 and info.value.code == "invalid_name"
    with pytest.raises(AgentRequestError) as info:
        client.workload("nope")
    assert info.value.status == 404 and info.value.code == "unknown_workload"
    client.start_rank("twice", launch("import time; time.sleep(600)"))
    with pytest.raises(AgentRequestError) as info:
        client.start_rank("twice", launch("import time; time.sleep(600)"))
    assert info.value.status == 409 and info.value.code == "already_running"
    with pytest.raises(AgentRequestError) as info:
        client.forget_workload("twice")
    assert info.value.status == 409 and info.value.code == "still_running"
    response = supervised.agent.client().post(
        "/v1/workloads", json={"workload_id": "x", "launch": {"argv": []}}
    )
    assert response.status_code == 422 and response.json()["error"] == "invalid_request"
    assert supervised.agent.client(token="wrong").get("/v1/workloads").status_code == 401


TWO_BURSTS = (
    "import os, sys, time\n"
    "for i in range(1, 6): print('line', i, flush=True)\n"
    "while not os.path.exists({flag!r}): time.sleep(0.05)\n"
    "for i in range(6, 11): print('line', i, flush=True)\n"
)


def test_logs_have_sequence_numbers_and_a_stream_resumes_where_it_left_off(supervised, tmp_path):
    client, flag = supervised.client, tmp_path / "go"
    client.start_rank("bursts", launch(TWO_BURSTS.format(flag=str(flag))))

    first: list[LogLine] = []
    for item in client.log_stream("bursts", since=0):
        assert not isinstance(item, LogGap)
        first.append(item)
        if item.text == "line 5":
            break
    assert [(line.seq, line.text) for line in first] == [(i, f"line {i}") for i in range(1, 6)]
    assert [line.seq for line in client.logs("bursts", since=3).lines][:2] == [4, 5]

    flag.touch()
    rest = list(client.log_stream("bursts", since=first[-1].seq))
    lines, end = rest[:-1], rest[-1]
    assert [line.text for line in lines[:5]] == [f"line {i}" for i in range(6, 11)]
    assert [line.seq for line in lines[:5]] == list(range(6, 11))
    assert isinstance(end, RankStatus) and end.state is RankState.exited and end.exit_code == 0

    client.forget_workload("bursts")  # finished: dropped from the list, its files from the disk
    assert client.workloads().workloads == []
    assert not (supervised.state_dir / "workloads" / "bursts").exists()


def test_tokens_from_log_lines_join_the_telemetry_and_metrics(supervised):
    client = supervised.client
    script = (
        "import time\n"
        "for step in range(1, 100000):\n"
        "    print(f'step {step:05d}/99999 (0.00%) | loss: 7.500000 | dt: 100ms | tok/sec: 4,649 | mfu: 1', flush=True)\n"
        "    time.sleep(0.1)\n"
    )
    source = {
        "kind": "log", "scope": "workload",
        "pattern": r"step (?P<step>\d+)/\d+\b.*?\| loss: (?P<loss>[-+0-9.eE]+|nan|inf)\b.*?\| tok/sec: (?P<tokens_per_s>[0-9][0-9,]*(?:\.[0-9]+)?)",
    }  # fmt: skip
    client.start_rank("train", launch(script, tokens_source=source, role="torchrun"))

    def figures():
        latest = client.snapshot().latest
        return (
            [f for f in (latest.workloads or []) if f.workload_id == "train" and f.step] if latest else None
        )

    found = wait_until(figures, "training figures in the telemetry")[0]
    assert found.decode_tps == 4649.0 and found.loss == 7.5 and found.step >= 1 and found.scope == "workload"
    metrics = client.metrics()
    assert (
        'sparksync_workload_decode_tokens_per_second{group="g",process="g.0.torchrun",rank="0",role="torchrun",workload="train"} 4649.0'
        in metrics
    )
    assert "sparksync_workload_loss{" in metrics

    client.stop_workload("train", grace_s=3.0)
    wait_until(lambda: not figures(), "the figures to leave the telemetry once stopped")


def test_engines_are_detected_through_the_api(supervised):
    report = supervised.client.engines()
    names = {c.name for c in report.checks}
    assert {
        "llama-server",
        "rpc-server",
        "torchrun",
        "mpirun",
        "python:vllm",
        "python:torch",
        "docker",
    } <= names
    assert report.engines["custom"] is True
    assert all(c.available or c.missing for c in report.checks)
    assert supervised.client.snapshot().engines == report  # the snapshot carries the last detection


def test_a_keeper_killed_outright_takes_its_whole_group_along(supervised):
    client = supervised.client
    script = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print('grandchild', p.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    client.start_rank("abrupt", launch(script))
    grandchild = int(wait_log(client, "abrupt", "grandchild")[0].split()[1])
    keeper = rank_of(client, "abrupt").pid

    os.kill(keeper, signal.SIGKILL)

    status = wait_state(client, "abrupt", RankState.failed)
    assert "without an exit status" in status.message
    wait_until(lambda: pid_gone(grandchild), "the grandchild to be gone with its keeper")
