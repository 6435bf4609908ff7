"""Fewer points for a plot, no spike lost: each pixel column's minimum and maximum.

A 10-minute window of 10 Hz samples is 6,000 points per curve, on a plot a
few hundred pixels wide. ``peak_decimate`` keeps, for every bin of
``bin_s`` seconds, the bin's lowest and highest value (in the order they
came), so the drawn line covers exactly what the raw one would, at about
two points per pixel. Bins are aligned to multiples of ``bin_s`` in absolute
time, so as the window slides, a bin's points stay put (no shimmer). A NaN
(a gap the dashboard marks) makes its bin NaN: the line still breaks there.
"""

from __future__ import annotations

import numpy as np


POINTS_PER_BIN_KEPT = 4  # up to this many points per bin on average, the data is drawn as it is


def peak_decimate(x: np.ndarray, y: np.ndarray, bin_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) with two points per ``bin_s`` bin, its min and its max in time order (unchanged when sparse)."""
    if len(x) < 3 or not bin_s > 0:
        return x, y
    bins = np.floor(x / bin_s)
    starts = np.flatnonzero(np.concatenate(([True], bins[1:] != bins[:-1])))
    if len(starts) * POINTS_PER_BIN_KEPT >= len(x):
        return x, y  # few enough: drawing them all costs less than sorting them out
    ends = np.append(starts[1:], len(x))
    nan = np.isnan(y)
    filled_hi = np.where(nan, -np.inf, y)
    filled_lo = np.where(nan, np.inf, y)
    # Where in each bin its extremes are: argmax over a segment, as an offset from the segment's start.
    hi_at = _segment_argext(filled_hi, starts, ends, np.maximum)
    lo_at = _segment_argext(filled_lo, starts, ends, np.minimum)
    first, second = np.minimum(lo_at, hi_at), np.maximum(lo_at, hi_at)
    xs = np.empty(2 * len(starts))
    ys = np.empty(2 * len(starts))
    xs[0::2], xs[1::2] = x[first], x[second]
    ys[0::2], ys[1::2] = y[first], y[second]
    has_nan = np.add.reduceat(nan.astype(np.int32), starts) > 0
    ys[0::2][has_nan] = np.nan
    ys[1::2][has_nan] = np.nan
    return xs, ys


def _segment_argext(values: np.ndarray, starts: np.ndarray, ends: np.ndarray, ufunc) -> np.ndarray:
    """The index of each segment's extreme (``ufunc``: np.maximum or np.minimum), the first one on ties."""
    extreme = ufunc.reduceat(values, starts)
    per_point = np.repeat(extreme, ends - starts)
    hits = np.flatnonzero(values == per_point)
    # The first hit at or after each segment's start is in that segment (its extreme is in it).
    return hits[np.searchsorted(hits, starts)]
