"""``python -m sparksync.gui.app``: the SparkSync desktop window.

Exit codes: 0 after a normal close (or, with ``--exit-after-first-sample``,
once the plots show live data); 1 when that live data never came; 2 when
there is no display to open a window on.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from sparksync import __version__

SMOKE_ENV = "SPARKSYNC_GUI_EXIT_AFTER_FIRST_SAMPLE"
SMOKE_TIMEOUT_S = 60.0

NO_DISPLAY = (
    "sparksync-gui: no display to open a window on (DISPLAY and WAYLAND_DISPLAY are unset).\n"
    "Use 'sparksync node status' for a text view, or set QT_QPA_PLATFORM=offscreen to run the window off-screen."
)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.version:
        print(f"sparksync-gui {__version__}")
        return 0
    problem = display_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return _run(args)


def display_problem(environ=os.environ, platform: str = sys.platform) -> str | None:
    """Why Qt could not open a window here, or None. Qt itself would abort (rc 134)."""
    if not platform.startswith("linux"):
        return None
    if any(environ.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")):
        return None
    return NO_DISPLAY


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sparksync-gui", description="The SparkSync desktop app.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="log more to stderr")
    # For tests and the packaging smoke test: prove the window reached live data, then exit 0.
    parser.add_argument("--exit-after-first-sample", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sample-hz", type=float, default=1.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.exit_after_first_sample = args.exit_after_first_sample or os.environ.get(SMOKE_ENV) == "1"
    return args


def _run(args: argparse.Namespace) -> int:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from sparksync.core.nodes import LocalNode
    from sparksync.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setApplicationName("SparkSync")
    app.setApplicationVersion(__version__)
    app.setQuitOnLastWindowClosed(False)  # quit once the worker is down, not when the window hides
    window = MainWindow(LocalNode(sample_hz=args.sample_hz))
    window.shut_down.connect(app.quit)
    outcome = {"code": 0}
    if args.exit_after_first_sample:
        _exit_on_live_data(window, outcome)
    _close_on_sigint(window)
    keepalive = QTimer()  # lets Python run its signal handlers while Qt's loop runs
    keepalive.start(200)
    keepalive.timeout.connect(lambda: None)
    window.show()
    window.start()
    app.exec()
    return outcome["code"]


def _exit_on_live_data(window, outcome: dict) -> None:
    from PySide6.QtCore import QTimer

    def on_timeout() -> None:
        print(f"sparksync-gui: no live data within {SMOKE_TIMEOUT_S:.0f} s; see the log in the status bar: "
              f"{window.statusBar().currentMessage()}", file=sys.stderr)
        outcome["code"] = 1
        window.close()

    timer = QTimer(window)
    timer.setSingleShot(True)
    timer.timeout.connect(on_timeout)
    timer.start(int(SMOKE_TIMEOUT_S * 1000))
    window.live_data_shown.connect(timer.stop)
    window.live_data_shown.connect(window.close)


def _close_on_sigint(window) -> None:
    signal.signal(signal.SIGINT, lambda *_: window.close())
    signal.signal(signal.SIGTERM, lambda *_: window.close())


if __name__ == "__main__":
    sys.exit(main())
