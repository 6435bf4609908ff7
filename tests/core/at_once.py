"""Calling one thing from several threads released together, for races on shared files."""

from __future__ import annotations

import threading
from collections.abc import Callable


def errors_at_once(call: Callable[[], object], threads: int) -> list[BaseException]:
    """What ``call`` raised in ``threads`` threads that all start it at the same moment."""
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def one() -> None:
        start.wait()
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - collected for the caller's assertion
            errors.append(exc)

    running = [threading.Thread(target=one) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    return errors
