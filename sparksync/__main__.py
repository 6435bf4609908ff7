"""The ``sparksync`` command (and ``python -m sparksync``): one name for the app and the CLI.

- no arguments, on a desktop session (a display to open a window on; always
  on macOS and Windows): the desktop app, as ``sparksync-gui`` opens it;
- no arguments without a display (an SSH login, a server): the CLI's help,
  and one line saying why no window opened and how to get one;
- ``sparksync gui [OPTIONS]``: the desktop app, with its options;
- anything else: the CLI (``sparksync node status`` ...), which never loads Qt.

The packaged app's single executable follows the same rules
(``packaging/pyinstaller/sparksync_main.py``).
"""

from __future__ import annotations

import os
import sys

NO_WINDOW_HINT = (
    "No window opened: there is no display here (DISPLAY and WAYLAND_DISPLAY are unset). "
    "On a desktop session `sparksync` (or `sparksync-gui`) opens the app; here, use the commands above."
)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["gui"]:
        return _gui(args[1:])
    if args:
        return _cli(args)
    return default()


def default(environ=os.environ, platform: str = sys.platform) -> int:
    """``sparksync`` alone: the app where a window can open, else the help and why no window opened."""
    from sparksync.gui.app import display_problem  # stdlib only until a window is wanted

    if display_problem(environ, platform) is None:
        return _gui([])
    code = _cli(["--help"])
    print(f"\n{NO_WINDOW_HINT}")
    return code


def _gui(args: list[str]) -> int:
    from sparksync.gui.app import main as gui_main

    return gui_main(args)


def _cli(args: list[str]) -> int:
    from sparksync.cli.main import main as cli_main

    try:
        cli_main(args)
    except SystemExit as done:  # click ends by exiting; the caller decides what the process does
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
