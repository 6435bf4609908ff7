"""Colours and line styles: a colour per node, a line style per kind of series.

Within a node, the kind tells the style (rx solid, tx dashed; used solid,
total dashed) and a second interface or GPU of the same kind is a lighter
shade of the node's colour, so one glance says whose line it is.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

# Distinct on a dark background and for the common colour-vision deficiencies (Okabe-Ito based).
NODE_COLOURS = ("#56b4e9", "#e69f00", "#009e73", "#f0e442", "#cc79a7", "#d55e00", "#0072b2", "#bbbbbb")
CLUSTER_COLOUR = "#ffffff"
BACKGROUND = "#101418"
FOREGROUND = "#c8ccd0"

_STYLES = {
    "solid": Qt.PenStyle.SolidLine,
    "dash": Qt.PenStyle.DashLine,
    "dot": Qt.PenStyle.DotLine,
}


def node_colour(index: int) -> QColor:
    return QColor(NODE_COLOURS[index % len(NODE_COLOURS)])


def shade(colour: QColor, instance_index: int) -> QColor:
    """The n-th interface or GPU of a node: the node's colour, lighter each time."""
    return colour.lighter(100 + 35 * instance_index) if instance_index else colour


def pen(colour: QColor, style: str, width: float = 1.0):
    import pyqtgraph as pg  # here, not at the top: the window's first paint needs no pyqtgraph

    # Width 1: Qt's raster engine draws wider lines about three times slower.
    return pg.mkPen(colour, width=width, style=_STYLES[style])
