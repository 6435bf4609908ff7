"""Open a terminal on a node: the system terminal running ``ssh <alias>``.

The alias is the node's ``Host`` entry in the ssh config SparkSync exports
(``sparksync node ssh-config``); ``ssh -F`` points at that file, so it works
whether or not the user included it in ``~/.ssh/config``. The key and the
pinned host key are the ones pairing set up.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from sparksync.core.ssh.client_key import KEY_FILE
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.config_export import export_ssh_config

log = logging.getLogger(__name__)

# (program, the option after which it takes a command to run), in order of preference.
TERMINALS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("x-terminal-emulator", ("-e",)),  # Debian's alternative: the user's chosen terminal
    ("gnome-terminal", ("--",)),
    ("konsole", ("-e",)),
    ("xfce4-terminal", ("-x",)),
    ("kitty", ()),
    ("alacritty", ("-e",)),
    ("xterm", ("-e",)),
)
TERMINAL_ENV = "SPARKSYNC_TERMINAL"  # e.g. "foot" or "wezterm start --": the command, then ssh's argv


class TerminalError(SparkSyncError):
    """No terminal program could be found or started."""


def ssh_argv(alias: str, config_path: Path) -> list[str]:
    return ["ssh", "-F", str(config_path), alias]


def terminal_argv(
    command: list[str], which: Callable[[str], str | None] = shutil.which, environ=os.environ
) -> list[str]:
    chosen = environ.get(TERMINAL_ENV)
    if chosen:
        return [*chosen.split(), *command]
    for program, before in TERMINALS:
        if which(program):
            return [program, *before, *command]
    raise TerminalError(
        "No terminal program was found (tried " + ", ".join(p for p, _ in TERMINALS) + "). Install one, or "
        f"name yours in {TERMINAL_ENV} (for example {TERMINAL_ENV}='foot'). Meanwhile run: "
        + " ".join(command)
    )


def node_ssh_argv(name: str, registry: Registry | None = None) -> list[str]:
    """``ssh -F <exported config> <name>``, exporting the config first (it follows the registry)."""
    registry = registry if registry is not None else Registry()
    registry.get(name)  # an unknown name fails here, with the list of paired nodes
    directory = registry.path.parent
    exported = export_ssh_config(registry.list(), directory / "keys" / KEY_FILE, directory)
    return ssh_argv(name, exported.config_path)


def open_terminal(name: str, registry: Registry | None = None, launch=subprocess.Popen) -> list[str]:
    """Start the system terminal with ssh to node ``name``; returns the command started."""
    argv = terminal_argv(node_ssh_argv(name, registry))
    try:
        # Its own session: the terminal outlives SparkSync and gets none of its signals.
        process = launch(
            argv,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError as exc:
        raise TerminalError(f"Could not start {argv[0]} ({exc.strerror or exc}).") from exc
    if hasattr(process, "wait"):  # reap it when it ends, so no zombie stays behind
        threading.Thread(target=process.wait, name=f"terminal-{name}", daemon=True).start()
    log.info("opened a terminal: %s", " ".join(argv))
    return argv
