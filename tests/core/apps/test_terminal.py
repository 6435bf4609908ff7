"""Open a terminal on a node: the command line, and the exported ssh config it relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparksync.core.nodes.registry import Registry, UnknownNodeError
from sparksync.core.apps.terminal import TERMINAL_ENV, TerminalError, open_terminal, terminal_argv
from tests.core.node_factory import paired_node


def test_the_first_terminal_found_runs_ssh_with_our_config():
    assert terminal_argv(["ssh", "n1"], which=lambda p: p == "xterm", environ={}) == [
        "xterm",
        "-e",
        "ssh",
        "n1",
    ]
    assert terminal_argv(["ssh", "n1"], which=lambda p: p == "gnome-terminal", environ={})[:2] == [
        "gnome-terminal",
        "--",
    ]
    assert terminal_argv(["ssh", "n1"], which=lambda p: True, environ={TERMINAL_ENV: "foot -a"}) == [
        "foot",
        "-a",
        "ssh",
        "n1",
    ]
    with pytest.raises(TerminalError, match="ssh n1"):
        terminal_argv(["ssh", "n1"], which=lambda p: None, environ={})


def test_open_terminal_exports_the_config_and_starts_the_terminal(monkeypatch):
    Registry().add(paired_node("n1", 1))
    monkeypatch.setenv(TERMINAL_ENV, "my-term -e")
    started = []
    argv = open_terminal("n1", launch=lambda argv, **kw: started.append((argv, kw)))
    assert argv[:3] == ["my-term", "-e", "ssh"] and argv[-1] == "n1"
    config = argv[argv.index("-F") + 1]
    assert "Host n1\n" in Path(config).read_text()
    assert started[0][1]["start_new_session"] is True
    with pytest.raises(UnknownNodeError):
        open_terminal("nope", launch=lambda argv, **kw: None)


def test_a_real_terminal_process_is_started_with_the_ssh_command(tmp_path, monkeypatch):
    import json
    import sys
    import time

    Registry().add(paired_node("n1", 1))
    seen = tmp_path / "argv.json"
    fake_terminal = tmp_path / "term.py"
    fake_terminal.write_text(  # written whole, then renamed: the test never reads half a file
        f"import json, os, sys\nopen({str(seen)!r} + '.tmp', 'w').write(json.dumps(sys.argv[1:]))\n"
        f"os.rename({str(seen)!r} + '.tmp', {str(seen)!r})\n"
    )
    monkeypatch.setenv(TERMINAL_ENV, f"{sys.executable} {fake_terminal}")
    open_terminal("n1")
    deadline = time.monotonic() + 30
    while not seen.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    argv = json.loads(seen.read_text())
    assert argv[0] == "ssh" and argv[1] == "-F" and argv[-1] == "n1"
    assert "IdentitiesOnly yes" in Path(argv[2]).read_text()
