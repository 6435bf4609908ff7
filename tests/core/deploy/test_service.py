"""The systemd user unit deploy writes, the mode it picks, and the commands of each mode."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sparksync.core.deploy import service
from sparksync.core.deploy.layout import LAYOUT
from sparksync.core.deploy.prechecks import NodeFacts
from sparksync.core.deploy.remote import RemoteNode, failure_text
from sparksync.core.ssh.connection import CommandResult

PACKAGED_UNIT = Path(__file__).resolve().parents[3] / "packaging" / "systemd" / "sparksync-agent.service"


def test_the_unit_runs_the_current_version_with_the_layouts_state_dir():
    text = service.unit_text(advertise=True, sample_hz=1.0)
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    assert exec_start == (
        "ExecStart=%h/.local/share/sparksync-agent/current/venv/bin/sparksync-agent serve --port 0 "
        "--state-dir %h/.local/state/sparksync-agent --sample-hz 1 --advertise"
    )
    assert "--no-advertise" in service.unit_text(advertise=False)


def test_the_packaged_unit_is_the_one_deploy_writes():
    # The file in packaging/ is for people who install by hand; it must not drift from deploy's.
    assert PACKAGED_UNIT.read_text() == service.unit_text()


def test_the_mode_is_systemd_where_user_systemd_works_else_supervised():
    assert service.choose_mode(NodeFacts(systemd_user=True)) == "systemd-user"
    assert service.choose_mode(NodeFacts(systemd_user=False)) == "supervised"
    assert service.choose_mode(NodeFacts(systemd_user=True), "supervised") == "supervised"
    with pytest.raises(ValueError, match="unknown service mode"):
        service.choose_mode(NodeFacts(), "cron")
    assert service.running_mode(NodeFacts(supervisor_pid=12)) == "supervised"
    assert service.running_mode(NodeFacts(service_active=True)) == "systemd-user"
    assert service.running_mode(NodeFacts()) is None


class Recorder(RemoteNode):
    """Records every script; ``fail`` maps a script fragment to an exit status."""

    def __init__(self, fail: dict[str, int] | None = None):
        super().__init__(transport=None, name="spark-1", cancel=threading.Event())
        self.scripts: list[tuple[str, tuple[str, ...]]] = []
        self.files: dict[str, bytes] = {}
        self.fail = fail or {}

    def sh(self, script, *args, timeout=None):
        self.scripts.append((script, args))
        status = next((code for part, code in self.fail.items() if part in script), 0)
        return CommandResult(status, b"", b"boom\n" if status else b"")

    def write_file(self, path, data, mode=0o644):
        self.files[path] = data


def test_systemd_mode_writes_the_unit_then_reloads_enables_and_restarts():
    remote = Recorder(fail={"enable-linger": 1})
    notes = service.restart(remote, service.SYSTEMD, advertise=False, sample_hz=2.0)
    assert remote.files[LAYOUT.unit_file] == service.unit_text(False, 2.0).encode()
    joined = "\n".join(script for script, _ in remote.scripts)
    assert joined.index("kill -TERM") < joined.index("daemon-reload")  # the old supervisor goes first
    assert (
        'systemctl --user daemon-reload && systemctl --user enable "$1" && systemctl --user restart "$1"'
        in joined
    )
    assert notes and "sudo loginctl enable-linger" in notes[0]


def test_supervised_mode_stops_the_service_and_the_old_supervisor_then_starts_one_detached():
    remote = Recorder()
    remote.sh = _answer_pid(remote.sh)
    service.restart(remote, service.SUPERVISED, advertise=True, sample_hz=1.0)
    start_script, args = remote.scripts[-1]
    assert "setsid -f" in start_script and "</dev/null" in start_script
    assert args[:7] == (
        LAYOUT.root, LAYOUT.state_dir, LAYOUT.current_agent, LAYOUT.supervise_pid, LAYOUT.log_file,
        LAYOUT.supervise_state, LAYOUT.state_dir,
    )  # fmt: skip
    assert args[7:10] == ("--sample-hz", "1", "--advertise")
    assert any("systemctl --user stop" in script for script, _ in remote.scripts)


def _answer_pid(sh):
    def wrapped(script, *args, timeout=None):
        result = sh(script, *args, timeout=timeout)
        return CommandResult(0, b"4242\n", b"") if "setsid -f" in script else result

    return wrapped


def test_a_failed_command_is_reported_by_its_last_lines():
    assert failure_text(CommandResult(1, b"", b"a\nb\n\nc\nd\n")) == "b / c / d"
    assert failure_text(CommandResult(7, b"", b"")) == "exit status 7"
