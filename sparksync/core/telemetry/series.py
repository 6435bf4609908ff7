"""A fixed-size, Qt-free ring buffer of numeric time series.

Each column is stored twice (at ``i`` and ``i + capacity``) so the newest
``n`` values are always one contiguous slice: plots get a view, no copy and
no concatenation on every redraw.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")  # the window paints before there is a sample to store


class SeriesBuffer:
    """The last ``capacity`` rows of named float columns, oldest first."""

    def __init__(self, capacity: int, columns: Iterable[str]):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.columns = tuple(columns)
        if not self.columns:
            raise ValueError("a SeriesBuffer needs at least one column")
        self._data = np.full((len(self.columns), 2 * capacity), np.nan)
        self._index = {name: i for i, name in enumerate(self.columns)}
        self._next = 0  # slot the next row goes to
        self._size = 0
        self.version = 0  # bumps on every change, so a redraw can skip when nothing moved

    def __len__(self) -> int:
        return self._size

    def append(self, row: Mapping[str, float]) -> None:
        """Add one row; a missing column is stored as NaN (a gap in the plot)."""
        values = [row.get(name, np.nan) for name in self.columns]
        self._data[:, self._next] = values
        self._data[:, self._next + self.capacity] = values
        self._next = (self._next + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)
        self.version += 1

    def extend(self, columns: Mapping[str, np.ndarray]) -> None:
        """Append many rows at once (vectorised: history loads thousands of rows)."""
        lengths = {len(values) for values in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of one extend() must have one length, got {sorted(lengths)}")
        n = lengths.pop() if lengths else 0
        if n == 0:
            return
        block = np.full((len(self.columns), min(n, self.capacity)), np.nan)
        for name, values in columns.items():
            block[self._index[name]] = np.asarray(values, dtype=float)[-self.capacity :]
        slots = (self._next + np.arange(block.shape[1])) % self.capacity
        self._data[:, slots] = block
        self._data[:, slots + self.capacity] = block
        self._next = int(slots[-1] + 1) % self.capacity
        self._size = min(self._size + block.shape[1], self.capacity)
        self.version += 1

    def add_column(self, name: str) -> None:
        """Add a column (NaN in the rows already held): a new interface or GPU appeared."""
        if name in self._index:
            return
        self._index[name] = len(self.columns)
        self.columns = (*self.columns, name)
        self._data = np.vstack([self._data, np.full((1, 2 * self.capacity), np.nan)])
        self.version += 1

    def column(self, name: str) -> np.ndarray:
        """A read-only view of one column, oldest first."""
        start = self._next + self.capacity - self._size
        view = self._data[self._index[name], start : start + self._size]
        view.flags.writeable = False
        return view

    def since(self, time_column: str, t0: float) -> slice:
        """The slice of rows whose ``time_column`` is >= ``t0`` (the column must grow)."""
        times = self.column(time_column)
        return slice(int(np.searchsorted(times, t0, side="left")), len(times))

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def clear(self) -> None:
        self._data.fill(np.nan)
        self._next = 0
        self._size = 0
        self.version += 1
