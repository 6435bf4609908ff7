"""``python -m sparksync.gui.app`` as a real process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sparksync_agent.state import read_endpoint

from sparksync import __version__
from sparksync.gui.app import NO_DISPLAY, cli_command, display_problem

pytestmark = pytest.mark.gui


def run_app(*args: str, env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sparksync.gui.app", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
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
    assert f"'{cli_command(os.environ.get('PATH', os.defpath))} node status'" in done.stderr
    assert "QT_QPA_PLATFORM=offscreen" in done.stderr


def test_the_suggested_command_is_the_one_that_runs_here(tmp_path):
    """The same command the message names, typed in the same shell, gives the text view."""
    env = headless_env(tmp_path)
    env["PATH"] = "/usr/bin:/bin"  # a source checkout: its .venv/bin is not on PATH
    done = run_app(env=env)
    line = next(ln for ln in done.stderr.splitlines() if "node status" in ln)
    command = line.split("'")[1].split()
    assert command[0] != "sparksync"  # not on this PATH: named by its path
    shown = subprocess.run(
        [*command[:-2], "--help"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert shown.returncode == 0 and "node" in shown.stdout


def test_the_command_is_named_as_it_is_found(tmp_path):
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "sparksync").write_text("#!/bin/sh\n")
    (venv / "sparksync").chmod(0o755)
    python = str(venv / "python")
    assert cli_command(str(venv), python, cwd=tmp_path) == "sparksync"  # on PATH: its plain name
    assert cli_command("/usr/bin:/bin", python, cwd=tmp_path) == ".venv/bin/sparksync"  # from the checkout
    assert cli_command("/usr/bin:/bin", python, cwd=tmp_path / "elsewhere") == str(venv / "sparksync")
    bare = tmp_path / "bare" / "python"
    assert cli_command("/usr/bin:/bin", str(bare), cwd=tmp_path) == "bare/python -m sparksync"


def test_display_problem_rules():
    assert display_problem({"PATH": "/usr/bin:/bin"}, "linux") == NO_DISPLAY.format(
        cli=cli_command("/usr/bin:/bin")
    )
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


def test_the_app_reaches_this_computer_and_the_paired_nodes_through_one_fleet(home):
    from sparksync.core.nodes.registry import Registry
    from sparksync.gui.app import cluster
    from tests.core.node_factory import paired_node

    actions = cluster(5.0)
    registry = Registry()
    for i, name in enumerate(["spark-a", "spark-b"]):
        registry.add(paired_node(name, i + 1))
    fleet = actions.fleet()
    assert actions.fleet() is fleet and fleet.local.sample_hz == 5.0
    assert fleet.names() == ["this computer", "spark-a", "spark-b"]  # this computer beside the cluster
    assert fleet.cluster() == ["spark-a", "spark-b"]  # which the cluster's figures count
    actions.close()


_PAINT_PROBE = """
import sys
import sparksync.gui.app as app
shown = app._print_mark
def mark(what):
    shown(what)
    loaded = [name in sys.modules for name in ("pyqtgraph", "numpy", "sparksync_agent.protocol")]
    print(what, *loaded, flush=True)
app._print_mark = mark
sys.exit(app.main([]))
"""


def test_the_window_paints_before_pyqtgraph_numpy_and_the_protocol_are_imported_and_the_plots_follow(tmp_path):
    # pyqtgraph's import and the eight plots cost more than the rest of the first screen: the
    # window paints first, then the dashboard builds its plots and every shown one paints.
    # numpy (the dashboard's buffers, the history) and the wire models wait too: no sample has
    # arrived at the paint.
    env = {**headless_env(tmp_path), "QT_QPA_PLATFORM": "offscreen", "SPARKSYNC_GUI_EXIT_AFTER_FIRST_PAINT": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _PAINT_PROBE], env=env, capture_output=True, text=True, timeout=90, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    probed = [line.split() for line in done.stdout.splitlines() if line.split()[-1] in ("True", "False")]
    assert probed[0] == ["first-paint", "False", "False", "False"]
    assert [p[:3] for p in probed[1:]] == [["plots-painted", "True", "True"]]  # the protocol: as workers go
