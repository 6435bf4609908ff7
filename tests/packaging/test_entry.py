"""The packaged app's one executable routes its arguments to the GUI, the CLI or the agent."""

from __future__ import annotations

import importlib.util

import pytest

from tests.packaging.debcache import ROOT

_spec = importlib.util.spec_from_file_location(
    "sparksync_main", ROOT / "packaging/pyinstaller/sparksync_main.py"
)
entry = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(entry)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], ("default", [])),  # what the desktop entry runs: the app where a display is, else the help
        (["gui", "--exit-after-first-sample"], ("gui", ["--exit-after-first-sample"])),
        (["--version"], ("cli", ["--version"])),
        (["node", "status", "--json"], ("cli", ["node", "status", "--json"])),
        (["agent", "version"], ("agent", ["version"])),
        # LocalAgent starts the agent as `sys.executable -m sparksync_agent`; frozen, that is this binary.
        (["-m", "sparksync_agent", "serve", "--port", "0"], ("agent", ["serve", "--port", "0"])),
        # An autostart entry written by the packaged app runs `sys.executable -m sparksync.gui.app`.
        (["-m", "sparksync.gui.app"], ("gui", [])),
        (["-m", "pip", "install", "x"], ("refuse", ["-m pip"])),
        (["-m"], ("refuse", ["-m"])),
        (["-c", "print(1)"], ("refuse", ["-c"])),
    ],
)
def test_route(argv, expected):
    assert entry.route(argv) == expected


def test_called_as_sparksync_gui_it_opens_the_app():
    assert entry.route([], "/usr/bin/sparksync-gui") == ("gui", [])
    assert entry.route(["--verbose"], "sparksync-gui") == ("gui", ["--verbose"])
    assert entry.route(["--version"], "/usr/bin/sparksync") == ("cli", ["--version"])


def test_refusal_names_what_was_asked_and_where_to_read_more(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["sparksync", "-m", "pip", "install", "x"])
    assert entry.main() == 2
    err = capsys.readouterr().err
    assert "(-m pip)" in err and "docs/packaging.md" in err


def test_agent_route_runs_the_agent_cli(monkeypatch, capsys):
    from sparksync import __version__

    monkeypatch.setattr("sys.argv", ["sparksync", "-m", "sparksync_agent", "version"])
    assert entry.main() == 0
    assert capsys.readouterr().out.startswith(f"sparksync-agent {__version__} ")
