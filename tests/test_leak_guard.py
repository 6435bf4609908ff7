"""The suite's leak guard (tests/conftest.py): strict about running threads, not fooled by ended ones."""

from __future__ import annotations

import _thread
import threading

from tests.conftest import _running, _threads


def _in_a_native_thread(release: threading.Event, entered: threading.Event) -> None:
    threading.current_thread()  # what logging does: makes a _DummyThread for this thread
    entered.set()
    release.wait(10)


def test_a_native_thread_counts_while_it_runs_and_not_after_it_ended():
    release, entered = threading.Event(), threading.Event()
    _thread.start_new_thread(_in_a_native_thread, (release, entered))
    assert entered.wait(10)
    dummies = [t for t in _threads() if isinstance(t, threading._DummyThread)]
    assert len(dummies) == 1 and _running(dummies[0])  # running: a leak the guard reports
    release.set()
    for _ in range(200):
        if not _running(dummies[0]):
            break
        threading.Event().wait(0.02)
    assert not _running(dummies[0])
