"""``python -m sparksync.gui.app`` as a real process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sparksync import __version__
from sparksync.gui.app import NO_DISPLAY, display_problem
from sparksync_agent.state import read_endpoint

pytestmark = pytest.mark.gui


def run_app(*args: str, env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sparksync.gui.app", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def headless_env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    return {**env, "SPARKSYNC_HOME": str(tmp_path)}


def test_version(tmp_path):
    done = run_app("--version", env=headless_env(tmp_path))
    assert done.returncode == 0 and done.stdout.strip() == f"sparksync-gui {__version__}"


def test_no_display_is_a_clear_message_not_an_abort(tmp_path):
    done = run_app(env=headless_env(tmp_path))
    assert done.returncode == 2
    assert "sparksync node status" in done.stderr and "QT_QPA_PLATFORM=offscreen" in done.stderr


def test_display_problem_rules():
    assert display_problem({}, "linux") == NO_DISPLAY
    assert display_problem({"DISPLAY": ":0"}, "linux") is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert display_problem({}, "darwin") is None


@pytest.mark.parametrize("how", ["flag", "env"])
def test_smoke_run_reaches_live_data_and_exits_0(tmp_path, how):
    env = {**headless_env(tmp_path), "QT_QPA_PLATFORM": "offscreen"}
    args = ["--exit-after-first-sample"] if how == "flag" else []
    if how == "env":
        env["SPARKSYNC_GUI_EXIT_AFTER_FIRST_SAMPLE"] = "1"
    done = run_app(*args, env=env)
    assert done.returncode == 0, done.stderr
    assert read_endpoint(tmp_path / "data" / "local-agent") is None  # the agent it started is gone
