"""The dashboard's time axis: wall-clock ticks, the same on every plot, never finer than a second.

pyqtgraph's date axis picks its tick spacing from the plot's own width and,
below about a second per label, switches to a "seconds.milliseconds" format
("03.000, 04.000"). On the dashboard the plots differ in width (the last one
may take a whole row) and the first seconds of data span little time, so
the plots' ticks disagreed. Here every plot's ticks are chosen for the same
reference width (the narrowest plot's, set by the dashboard) and the finest
format is HH:MM:SS, so all plots read alike from the first second.
"""

from __future__ import annotations

from collections import OrderedDict

import pyqtgraph as pg

# pyqtgraph's own zoom levels, without the millisecond one (its key is the smallest, 1 s).
_FINEST_KEPT = 30


class TimeAxis(pg.DateAxisItem):
    def __init__(self, orientation: str = "bottom", **kwargs):
        super().__init__(orientation, **kwargs)
        self.zoomLevels = OrderedDict(
            (spacing, level) for spacing, level in self.zoomLevels.items() if spacing >= _FINEST_KEPT
        )
        self.tick_width: float | None = None  # pixels the ticks are chosen for; None: this axis' width

    def set_tick_width(self, width: float | None) -> None:
        if width != self.tick_width:
            self.tick_width = width
            self.picture = None  # the ticks change: draw them again
            self.update()

    def tickValues(self, minVal, maxVal, size):  # noqa: N802, N803 - pyqtgraph's names
        reference = min(size, self.tick_width) if self.tick_width else size
        values = super().tickValues(minVal, maxVal, max(reference, 1.0))
        return values
