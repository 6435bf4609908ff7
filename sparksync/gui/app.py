"""``python -m sparksync.gui.app``: the SparkSync desktop window.

Exit codes: 0 after a normal close (or, with ``--exit-after-first-sample``,
once the plots show live data); 1 when that live data never came; 2 when
there is no display to open a window on.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from sparksync import __version__

SMOKE_ENV = "SPARKSYNC_GUI_EXIT_AFTER_FIRST_SAMPLE"
# For the start-up benchmark: print "first-paint <unix time> <CPU s>" once the window has painted, and
# "plots-painted ..." once the dashboard's plots have (they are built after the first paint), then quit.
FIRST_PAINT_ENV = "SPARKSYNC_GUI_EXIT_AFTER_FIRST_PAINT"
# For the screenshot test and docs/screenshots: once live data shows, wait SPARKSYNC_GUI_SCREENSHOT_AFTER_S
# (default 5) seconds, save a PNG of the window to this path, then quit.
SCREENSHOT_ENV = "SPARKSYNC_GUI_SCREENSHOT"
SCREENSHOT_AFTER_ENV = "SPARKSYNC_GUI_SCREENSHOT_AFTER_S"
# The tab to show in that screenshot, by its title (default: the dashboard); made current 2 s before.
SCREENSHOT_TAB_ENV = "SPARKSYNC_GUI_SCREENSHOT_TAB"
TAB_SETTLE_S = 2.0
SMOKE_TIMEOUT_S = 60.0
# "0": never browse mDNS (scripts, and tests that must not touch the host's network).
DISCOVERY_ENV = "SPARKSYNC_DISCOVERY"

NO_DISPLAY = (
    "sparksync-gui: no display to open a window on (DISPLAY and WAYLAND_DISPLAY are unset).\n"
    "Use '{cli} node status' for a text view, or set QT_QPA_PLATFORM=offscreen to run the window off-screen."
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
    from sparksync.core.base import remove_interrupted_writes

    remove_interrupted_writes()  # temp files of writers killed mid-write, e.g. the registry's
    return _run(args)


def display_problem(environ=os.environ, platform: str = sys.platform) -> str | None:
    """Why Qt could not open a window here, or None. Qt itself would abort (rc 134)."""
    if not platform.startswith("linux"):
        return None
    if any(environ.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")):
        return None
    return NO_DISPLAY.format(cli=cli_command(environ.get("PATH", os.defpath)))


def cli_command(search_path: str, executable: str = sys.executable, cwd: Path | None = None) -> str:
    """How to type the ``sparksync`` command that belongs to this Python, as this shell would find it.

    Installed, it is on PATH; from a source checkout's virtual environment it
    often is not (``.venv/bin/sparksync``); with no script at all, ``python -m sparksync``.
    """
    # The script sits beside the interpreter of its environment (not resolved: a venv's python is a link).
    script = Path(executable).parent / "sparksync"
    found = shutil.which("sparksync", path=search_path)
    if found and (not script.exists() or Path(found).resolve() == script.resolve()):
        return "sparksync"
    if script.exists():
        return _shown_path(script, cwd or Path.cwd())
    return f"{_shown_path(Path(executable), cwd or Path.cwd())} -m sparksync"


def _shown_path(path: Path, cwd: Path) -> str:
    absolute = path if path.is_absolute() else cwd / path
    try:
        return str(absolute.relative_to(cwd))  # .venv/bin/sparksync from the checkout
    except ValueError:
        return str(absolute)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sparksync-gui", description="The SparkSync desktop app.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="log more to stderr")
    # For tests and the packaging smoke test: prove the window reached live data, then exit 0.
    parser.add_argument("--exit-after-first-sample", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sample-hz", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--no-discovery", action="store_true", help="do not browse the network for nodes")
    args = parser.parse_args(argv)
    args.exit_after_first_sample = args.exit_after_first_sample or os.environ.get(SMOKE_ENV) == "1"
    return args


def _run(args: argparse.Namespace) -> int:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from sparksync.core.apps import AppSettings, SettingsError, load_settings
    from sparksync.gui.main_window import MainWindow
    from sparksync.gui.theme import apply_theme
    from sparksync.gui.tray.setup import install_tray

    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setApplicationName("SparkSync")
    app.setApplicationVersion(__version__)
    app.setQuitOnLastWindowClosed(False)  # quit once the worker is down, not when the window hides
    try:
        settings, settings_problem = load_settings(), None  # one small file, before the window exists
    except SettingsError as exc:
        settings, settings_problem = AppSettings(), str(exc)
    apply_theme(settings.theme)
    sample_hz = args.sample_hz if args.sample_hz is not None else settings.sample_hz
    window = MainWindow(actions=cluster(sample_hz), settings=settings)
    if settings_problem:
        window.settings_writable = False
        window.statusBar().showMessage(f"Error: {settings_problem}")
    window.shut_down.connect(app.quit)
    smoke = args.exit_after_first_sample or any(os.environ.get(v) for v in (FIRST_PAINT_ENV, SCREENSHOT_ENV))
    if not (smoke or args.no_discovery or os.environ.get(DISCOVERY_ENV) == "0"):
        window.discovery_factory = _start_discovery
    if not smoke:
        install_tray(window)
    outcome = {"code": 0}
    if args.exit_after_first_sample:
        _exit_on_live_data(window, outcome)
    if os.environ.get(FIRST_PAINT_ENV) == "1":
        _exit_on_first_paint(window)
    if os.environ.get(SCREENSHOT_ENV):
        _screenshot_then_exit(
            window, os.environ[SCREENSHOT_ENV], float(os.environ.get(SCREENSHOT_AFTER_ENV, "5")), outcome
        )
    _close_on_sigint(window)
    keepalive = QTimer()  # lets Python run its signal handlers while Qt's loop runs
    keepalive.start(200)
    keepalive.timeout.connect(lambda: None)
    window.show()
    _start_after_first_paint(window)
    app.exec()
    return outcome["code"]


def cluster(sample_hz: float):
    """The app's actions over the cluster, with its one fleet (opened in a worker once the window runs,
    closed when the app quits): this computer's agent samples at ``sample_hz``."""
    from sparksync.core.nodes import ClusterActions

    return ClusterActions(sample_hz=sample_hz)


def _start_discovery():
    from sparksync.core.discovery import Discovery

    return Discovery().start()  # this computer's IPv4 interfaces; a clear error when there are none


def _start_after_first_paint(window, fallback_ms: int = 1000) -> None:
    """Start the workers once the window has painted: the window first, filled as they answer.

    The workers (the fleet, this computer's agent, the history, the registry)
    hold the interpreter while they import and read; started before the first
    paint they delay it by as much. A window that never paints (started
    hidden) starts them after ``fallback_ms`` all the same.
    """
    from PySide6.QtCore import QEvent, QObject, QTimer

    started = {"done": False}

    def start() -> None:
        if not started["done"]:
            started["done"] = True
            window.start()

    def start_after_plots() -> None:
        # The dashboard builds its plots after the first paint too: they go first (built and
        # painted), as the workers' imports would only slow them down.
        if window.dashboard.plots_ready:
            start()
        else:
            window.dashboard.plots_shown.connect(start)

    class Watcher(QObject):
        def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt's name
            if event.type() == QEvent.Type.Paint:
                window.removeEventFilter(self)
                QTimer.singleShot(0, start_after_plots)  # after this paint pass, not inside it
            return False

    watcher = Watcher(window)
    window.installEventFilter(watcher)
    QTimer.singleShot(fallback_ms, start)


def _exit_on_live_data(window, outcome: dict) -> None:
    from PySide6.QtCore import QTimer

    def on_timeout() -> None:
        print(
            f"sparksync-gui: no live data within {SMOKE_TIMEOUT_S:.0f} s; see the log in the status bar: "
            f"{window.statusBar().currentMessage()}",
            file=sys.stderr,
        )
        outcome["code"] = 1
        window.close()

    timer = QTimer(window)
    timer.setSingleShot(True)
    timer.timeout.connect(on_timeout)
    timer.start(int(SMOKE_TIMEOUT_S * 1000))
    window.live_data_shown.connect(timer.stop)
    window.live_data_shown.connect(window.close)


def _exit_on_first_paint(window) -> None:
    from PySide6.QtCore import QEvent, QObject, QTimer

    dashboard = window.dashboard

    class FirstPaint(QObject):
        """Prints "first-paint" once the window has painted, then "plots-painted" once every plot
        on screen has (they are built after the first paint), then closes the window."""

        def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt's name
            if event.type() == QEvent.Type.Paint:
                window.removeEventFilter(self)
                QTimer.singleShot(0, self.report)  # after the whole paint pass, not inside it
            return False

        def report(self) -> None:
            _print_mark("first-paint")
            dashboard.plots_shown.connect(self.report_plots)

        def report_plots(self) -> None:
            _print_mark("plots-painted")
            window.close()

    window._first_paint = FirstPaint(window)  # kept alive by the window
    window.installEventFilter(window._first_paint)


def _print_mark(what: str) -> None:
    # The wall clock, and this process's CPU seconds so far (all threads): on a shared
    # machine the second one says what the start costs, whatever the neighbours do.
    print(f"{what} {time.time():.6f} {time.process_time():.4f}", flush=True)


def _screenshot_then_exit(window, path: str, after_s: float, outcome: dict) -> None:
    from PySide6.QtCore import QTimer

    def shoot() -> None:
        image = window.grab().toImage()  # rendering belongs to the GUI thread; the file write does not

        def save() -> str:
            if not image.save(path, "PNG"):
                raise OSError(f"could not write {path}")
            return f"screenshot saved to {path}"

        window.dashboard.jobs.run("Screenshot", save)

    def failed(message: str) -> None:
        print(message, file=sys.stderr)
        outcome["code"] = 1
        window.close()

    def show_tab() -> None:
        title = os.environ.get(SCREENSHOT_TAB_ENV)
        titles = [window.tabs.tabText(i) for i in range(window.tabs.count())]
        if title and title in titles:
            window.tabs.setCurrentIndex(titles.index(title))
        elif title:
            failed(f"{SCREENSHOT_TAB_ENV}={title!r}: no such tab (the tabs are {', '.join(titles)})")

    window.dashboard.jobs.succeeded.connect(lambda _: window.close())
    window.dashboard.jobs.failed.connect(failed)
    window.live_data_shown.connect(lambda: QTimer.singleShot(int(max(0.0, after_s - TAB_SETTLE_S) * 1000), show_tab))
    window.live_data_shown.connect(lambda: QTimer.singleShot(int(after_s * 1000), shoot))


def _close_on_sigint(window) -> None:
    signal.signal(signal.SIGINT, lambda *_: window.close())
    signal.signal(signal.SIGTERM, lambda *_: window.close())


if __name__ == "__main__":
    sys.exit(main())
