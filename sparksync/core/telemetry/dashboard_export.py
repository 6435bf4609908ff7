"""Export what the dashboard shows as CSV.

Two steps, so the GUI thread never writes a file: ``visible_data`` copies
the shown series of a time range (numpy copies, cheap, on the GUI thread);
``export_csv`` formats and writes them (call it from a worker thread).

The CSV is long-form, one line per point, because nodes sample on their
own clocks and a wide table would be mostly holes::

    unix_time,time_utc,node,series,unit,value
    1761130000.1,2025-10-22T10:46:40.100Z,this computer,mem.used,B,12345678848

Values are in base units (bytes, bit/s, %, °C, W, tok/s), whatever unit the
plots show, so a script never has to guess GB from GiB.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from sparksync.core.telemetry.dashboard_model import DashboardModel
from sparksync.core.telemetry.dashboard_series import CLUSTER, kind_of
from sparksync_agent.atomic import write_atomic

HEADER = ("unix_time", "time_utc", "node", "series", "unit", "value")


@dataclass(frozen=True)
class SeriesData:
    node: str
    name: str
    t: np.ndarray
    v: np.ndarray

    @property
    def unit(self) -> str:
        return kind_of(self.name).unit


def visible_data(
    model: DashboardModel, t0: float, t1: float, shown: Callable[[str, str], bool]
) -> list[SeriesData]:
    """Copies of the finite points in ``[t0, t1]`` of every series ``shown(node, name)`` accepts."""
    data = []
    for node in [*model.nodes, CLUSTER]:
        for name in model.names(node):
            if shown(node, name):
                x, y = model.window(node, name, t0)
                keep = (x <= t1) & np.isfinite(y)
                if keep.any():
                    data.append(SeriesData(node, name, x[keep].copy(), y[keep].copy()))
    return data


def write_csv(data: Iterable[SeriesData], out: io.TextIOBase) -> int:
    """Write the CSV to ``out``; returns the number of points written."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    count = 0
    for series in data:
        for t, value in zip(series.t.tolist(), series.v.tolist()):
            writer.writerow((f"{t:.3f}", _utc(t), series.node, series.name, series.unit, _number(value)))
            count += 1
    return count


def export_csv(data: Iterable[SeriesData], path: Path) -> int:
    """Write the CSV file atomically (I/O: never on the GUI thread); returns the points written."""
    buffer = io.StringIO()
    count = write_csv(data, buffer)
    write_atomic(Path(path), buffer.getvalue(), mode=0o644)
    return count


def _number(value: float) -> str:
    # Exact and plain: byte counts stay integers (no 1.1e+10), other values round-trip.
    return f"{value:.0f}" if value.is_integer() and abs(value) < 1e15 else repr(value)


def _utc(t: float) -> str:
    return (
        datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )
