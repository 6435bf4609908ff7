"""packaging/dev/system-deps.sh waits for an apt lock another process holds, and says so.

The real apt-get runs, against a lists directory and source list of the
test's own (through APT_CONFIG, with no source to fetch), whose lock the
test holds for a while, so no network is used and no lock of this machine
is held by the test. ``dpkg`` is a stand-in that reports one installed
package (iproute2) missing, so the script goes on to apt; apt then finds it
installed and has nothing to do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "packaging" / "dev" / "system-deps.sh"
HELD_S = 3.0


def _script_env(tmp_path: Path, timeout_s: int) -> tuple[dict[str, str], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    dpkg = bin_dir / "dpkg"
    dpkg.write_text('#!/bin/sh\n[ "$2" = iproute2 ] && exit 1\nexec /usr/bin/dpkg "$@"\n')
    dpkg.chmod(0o755)
    lists = tmp_path / "lists"
    (lists / "partial").mkdir(parents=True)
    config = tmp_path / "apt.conf"
    config.write_text(
        f'Dir::State::Lists "{lists}/";\nDir::Etc::sourcelist "/dev/null";\n'
        f'Dir::Etc::sourceparts "{tmp_path}/no-sources";\n'
        f'Dir::Cache "{tmp_path}/cache/";\n'  # apt's binary caches, built from these lists, stay here too
    )
    (tmp_path / "cache" / "archives" / "partial").mkdir(parents=True)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "APT_CONFIG": str(config),
           "SPARKSYNC_APT_LOCK_TIMEOUT": str(timeout_s)}  # fmt: skip
    return env, lists / "lock"


_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
fcntl.lockf(fd, fcntl.LOCK_EX)  # apt's own kind of lock (fcntl)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold(lock: Path, seconds: float) -> subprocess.Popen:
    """Another process ("another apt") holds ``lock`` for ``seconds``."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(lock), str(seconds)], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    assert holder.stdout.readline() == "held\n"
    return holder


pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("apt-get") is None, reason="needs root and apt-get"
)


def _run_script(env: dict[str, str], holder: subprocess.Popen, release_after_s: float | None):
    """Run the script; the holder lets go ``release_after_s`` after the script reached apt (None: at the end)."""
    script = subprocess.Popen(["bash", str(SCRIPT)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        said = ""
        while "waiting for it up to" not in said:
            line = script.stdout.readline()
            assert line, script.stderr.read()
            said += line
        if release_after_s is not None:
            threading.Event().wait(release_after_s)  # the script's first update meets the held lock
            holder.terminate()
        out, err = script.communicate(timeout=120)
    finally:
        holder.terminate()
        holder.wait(30)
        holder.stdout.close()
    return script.returncode, said + out, err


def test_the_script_waits_while_another_apt_holds_the_lock_then_goes_on(tmp_path):
    env, lock = _script_env(tmp_path, timeout_s=60)
    code, out, err = _run_script(env, _hold(lock, 600), release_after_s=HELD_S)
    assert "waiting for it up to 60 s" in out
    assert "locked by another process; waiting" in err
    assert code == 0, err


def test_a_lock_held_past_the_timeout_fails_with_apts_message(tmp_path):
    env, lock = _script_env(tmp_path, timeout_s=1)
    code, _out, err = _run_script(env, _hold(lock, 600), release_after_s=None)
    assert code == 100, err
    assert "Could not get lock" in err and str(lock) in err
