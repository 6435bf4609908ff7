"""One name for the app: ``sparksync`` alone opens the desktop app on a desktop session, else says why not."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sparksync.__main__ import NO_WINDOW_HINT


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    return subprocess.run([sys.executable, "-m", "sparksync", *args], env={**clean, **env}, capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip


def test_without_a_display_it_prints_the_help_and_why_no_window_opened():
    done = run()
    assert done.returncode == 0, done.stderr
    assert "Usage: sparksync" in done.stdout and "node" in done.stdout
    assert done.stdout.rstrip().endswith(NO_WINDOW_HINT) and "sparksync-gui" in NO_WINDOW_HINT


def test_with_arguments_it_is_the_cli():
    done = run("--version")
    assert done.returncode == 0 and done.stdout.startswith("sparksync ")
    assert run("no-such-command").returncode == 2


@pytest.mark.gui
def test_on_a_desktop_session_it_opens_the_app(tmp_path):
    # A display to open a window on (offscreen stands in for one); the app paints, says so, and quits.
    done = run(QT_QPA_PLATFORM="offscreen", SPARKSYNC_GUI_EXIT_AFTER_FIRST_PAINT="1", SPARKSYNC_DISCOVERY="0",
               SPARKSYNC_HOME=str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "first-paint " in done.stdout and "Usage:" not in done.stdout


@pytest.mark.gui
def test_sparksync_gui_subcommand_takes_the_apps_options():
    done = run("gui", "--version")
    assert done.returncode == 0 and done.stdout.startswith("sparksync-gui ")
