"""A copy's ssh (its connection sharing, where its socket lives), and how a job's end is heard."""

from __future__ import annotations

import stat
import tempfile
import threading
from pathlib import Path

from sparksync_agent.transfer import ssh_command


def option(argv: list[str], name: str) -> str | None:
    values = [argv[i + 1].split("=", 1)[1] for i, part in enumerate(argv[:-1])
              if part == "-o" and argv[i + 1].startswith(name + "=")]  # fmt: skip
    return values[-1] if values else None


def test_a_control_folder_makes_the_reach_check_a_master_the_copy_rides_on():
    with tempfile.TemporaryDirectory(prefix="cm") as short:  # pytest's tmp_path is too long for a socket
        folder = Path(short) / "cm"
        argv = ssh_command(22, control_dir=folder)
        mode = stat.S_IMODE(folder.stat().st_mode)
    assert option(argv, "ControlMaster") == "auto"
    assert option(argv, "ControlPath") == f"{folder}/%C"
    assert int(option(argv, "ControlPersist") or 0) > 0
    assert mode == 0o700  # only the agent's user may use the socket
    assert option(argv, "StrictHostKeyChecking") == "yes" and option(argv, "BatchMode") == "yes"


def test_a_socket_path_too_long_for_ssh_goes_without_sharing(tmp_path):
    folder = tmp_path / ("x" * 60)
    argv = ssh_command(22, control_dir=folder)
    assert option(argv, "ControlMaster") is None and option(argv, "ControlPath") is None
    assert not folder.exists()


def test_without_a_control_folder_nothing_is_shared():
    assert option(ssh_command(22), "ControlPath") is None


def test_a_reader_waiting_on_a_job_hears_its_end_and_one_that_stays_running_as_it_is(tmp_path):
    from sparksync_agent.models import JobBoard, ModelStore
    from sparksync_agent.models.jobs import _Job
    from sparksync_agent.protocol import JobKind, JobState

    board = JobBoard(ModelStore(tmp_path))
    release = threading.Event()
    job = board._add(_Job(JobKind.push, "m"), lambda j: (release.wait(10), j.finish(JobState.done)))
    assert board.get(job.id, wait_s=0.05).state is JobState.running  # the wait passed; still running
    threading.Timer(0.2, release.set).start()
    assert board.get(job.id, wait_s=5.0).state is JobState.done  # answered on its end, not before
