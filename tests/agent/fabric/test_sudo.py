"""The sudo password reaches sudo's stdin only: never argv, the environment or a file."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest
from sparksync_agent.fabric import sudo
from sparksync_agent.protocol import FabricResult, InterfacePlan, NodeFabricPlan

SECRET = "s3cret-sudo-Passw0rd"

# A stand-in for sudo that records what it was given, then answers as the helper would.
FAKE_SUDO = """#!{python}
import json, os, sys
password = sys.stdin.readline().rstrip("\\n")
record = {{"argv": sys.argv, "env": dict(os.environ), "password": password, "rest": sys.stdin.read()}}
open({record!r}, "w").write(json.dumps(record))
if password != {secret!r}:
    sys.stderr.write("sudo: unable to resolve host spark-1\\nSorry, try again.\\nsudo: 1 incorrect password attempt\\n")
    sys.exit(1)
print('{{"ok": true, "action": "apply", "applier": "iproute2"}}')
"""


@pytest.fixture
def fake_sudo(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "record.json"
    script = bin_dir / "sudo"
    script.write_text(FAKE_SUDO.format(python=sys.executable, record=str(record), secret=SECRET))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return record


PLAN = NodeFabricPlan(plan_id="p", interfaces=[InterfacePlan(name="enp1s0f0np0", addresses=["10.100.0.1/24"])])


def test_password_goes_to_stdin_only(fake_sudo, tmp_path):
    result = sudo.run_helper("apply", "node-1", SECRET, tmp_path, plan=PLAN)
    assert isinstance(result, FabricResult) and result.ok
    record = json.loads(fake_sudo.read_text())
    assert record["password"] == SECRET and record["rest"] == ""  # nothing after the password line
    assert SECRET not in " ".join(record["argv"]) and SECRET not in json.dumps(record["env"])
    assert record["argv"][1:6] == ["-S", "-k", "-p", "", "--"]
    assert record["argv"][7:10] == ["-I", "-m", "sparksync_agent.fabric.helper"]
    assert not (tmp_path / "fabric-request.json").exists()  # the request file is gone after the call
    state_files = [p for p in tmp_path.rglob("*") if p.is_file() and p != fake_sudo and p.parent.name != "bin"]
    assert SECRET not in "".join(p.read_text(errors="replace") for p in state_files)


def test_wrong_password_is_a_refusal_without_the_password(fake_sudo, tmp_path):
    with pytest.raises(sudo.SudoRefused) as caught:
        sudo.run_helper("apply", "node-1", "Wr0ng-pw-XYZ", tmp_path, plan=PLAN)
    assert "incorrect password" in str(caught.value) and "Wr0ng-pw-XYZ" not in str(caught.value)


def test_the_request_models_hide_the_password():
    from sparksync_agent.protocol import FabricApply, FabricRollback

    assert SECRET not in repr(FabricApply(plan=PLAN, sudo_password=SECRET))
    assert SECRET not in repr(FabricRollback(sudo_password=SECRET))
