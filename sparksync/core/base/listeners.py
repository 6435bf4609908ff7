"""A thread-safe list of callbacks, for the core objects the GUI and the CLI subscribe to."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

F = TypeVar("F", bound=Callable[..., object])


class Listeners(Generic[F]):
    """Callbacks added and removed from any thread; callers iterate a snapshot.

    A snapshot, not the live list, so a listener may unsubscribe itself (or
    another) while being called without breaking the iteration.
    """

    def __init__(self) -> None:
        self._items: list[F] = []
        self._lock = threading.Lock()

    def add(self, listener: F) -> Callable[[], None]:
        """Subscribe ``listener``; returns the function that unsubscribes it (safe to call twice)."""
        with self._lock:
            self._items.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._items:
                    self._items.remove(listener)

        return unsubscribe

    def snapshot(self) -> list[F]:
        with self._lock:
            return list(self._items)
