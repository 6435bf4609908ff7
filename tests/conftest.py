"""Suite-wide guards: no test may leak threads or child processes, or touch real user files."""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

pytest_plugins = ["tests.lab.fixtures", "tests.core.keyring_fixtures", "tests.core.bench.fixtures"]


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Every test gets its own SPARKSYNC_HOME so nothing reaches the user's real files."""
    home = tmp_path_factory.mktemp("sparksync-home")
    monkeypatch.setenv("SPARKSYNC_HOME", str(home))
    return home


def _threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if _running(t)}


def _running(thread: threading.Thread) -> bool:
    """Whether ``thread`` still runs. A thread that threading did not start (a C library's, Qt's)
    shows up as a ``_DummyThread`` once it calls into Python, and Python 3.11 keeps that entry
    "alive" forever, even after the thread itself has ended. Its native thread tells the truth:
    one that still runs is reported like any other thread."""
    if isinstance(thread, threading._DummyThread):
        return thread.native_id is not None and os.path.exists(f"/proc/self/task/{thread.native_id}")
    return thread.is_alive()


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE}


@pytest.fixture(autouse=True)
def _no_leaks(request):
    """Fail a test that leaves threads or processes behind (after a short grace)."""
    threads_before, children_before = _threads(), _children()
    yield
    if request.node.get_closest_marker("allow_leaks"):
        return
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        leaked_threads = _threads() - threads_before
        leaked_children = _children() - children_before
        if not leaked_threads and not leaked_children:
            return
        threading.Event().wait(0.05)
    details = [f"thread {t.name}" + (f" (native {t.native_id})" if isinstance(t, threading._DummyThread) else "")
               for t in leaked_threads]  # fmt: skip
    details += [f"process {pid} ({_cmdline(pid)})" for pid in leaked_children]
    pytest.fail("test leaked: " + ", ".join(details), pytrace=False)


def _cmdline(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())[:120]
    except psutil.Error:
        return "gone"


def pytest_configure(config):
    # A run started as a shell's background job (`make test &` from a script) inherits SIGINT
    # ignored, and exec passes "ignored" on to every command a test spawns: a Ctrl-C sent to
    # it would then do nothing. A handler is not inherited (exec resets it to the default), so
    # installing Python's own gives each spawned command the SIGINT a terminal would give it.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Qt must never try a real display in tests (and aborts without one).
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
