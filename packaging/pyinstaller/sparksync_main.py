"""The packaged app's one executable, ``sparksync``.

One binary answers for the desktop app, the CLI and the agent, so the package
ships one copy of Python and Qt:

- no arguments: the desktop window where a display is (what the desktop
  entry starts), else the CLI's help and a one-line hint, as from a source
  install (``sparksync.__main__.default``); ``sparksync gui [OPTIONS]``: the
  desktop window;
- ``sparksync --version``, ``sparksync --help`` and every CLI command
  (``sparksync node status`` ...): the CLI, which never loads Qt;
- ``sparksync agent serve|status|version``: the node agent's own CLI;
- ``sparksync-gui [OPTIONS]`` (a link to this program): the desktop app, as
  from a source install, so ``shutil.which("sparksync-gui")`` finds it;
- ``sparksync -m sparksync_agent ...`` and ``sparksync -m sparksync.gui.app``:
  how the app starts its local agent, and how a login (autostart) entry
  starts the app when no ``sparksync-gui`` is on PATH. Both run
  ``sys.executable -m ...``; in the packaged app ``sys.executable`` is this
  binary, so it answers ``-m`` as a Python interpreter would, for these
  modules only.
"""

from __future__ import annotations

import os
import sys

GUI_PROGRAM = "sparksync-gui"
# Modules the code runs as ``sys.executable -m MODULE``, and which part answers each.
MODULES = {"sparksync_agent": "agent", "sparksync.gui.app": "gui"}
NOT_AN_INTERPRETER = (
    "sparksync: the packaged app cannot run Python code ({what}). "
    "Features that drive pip or other Python tools (bundle build, bench run, engine builds) "
    "need SparkSync installed from source; see docs/packaging.md."
)


def route(argv: list[str], program: str = "sparksync") -> tuple[str, list[str]]:
    """Which part of SparkSync handles ``argv`` (without the program name), and its arguments."""
    if os.path.basename(program) == GUI_PROGRAM:
        return "gui", argv
    if not argv:
        return "default", []
    head, rest = argv[0], argv[1:]
    if head == "gui":
        return "gui", rest
    if head == "agent":
        return "agent", rest
    if head == "-m":
        if rest and rest[0] in MODULES:
            return MODULES[rest[0]], rest[1:]
        return "refuse", [f"-m {rest[0]}" if rest else "-m"]
    if head == "-c":
        return "refuse", ["-c"]
    return "cli", argv


def main() -> int:
    part, args = route(sys.argv[1:], sys.argv[0])
    if part == "default":
        from sparksync.__main__ import default

        return default()
    if part == "gui":
        from sparksync.gui.app import main as gui_main

        return gui_main(args)
    if part == "agent":
        from sparksync_agent.cli import main as agent_main

        return agent_main(args)
    if part == "refuse":
        print(NOT_AN_INTERPRETER.format(what=args[0]), file=sys.stderr)
        return 2
    from sparksync.cli.main import main as cli_main

    cli_main(args)  # click exits by itself
    return 0


if __name__ == "__main__":
    sys.exit(main())
