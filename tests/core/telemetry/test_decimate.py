"""Peak decimation: two points per bin, every spike kept, gaps kept, bins fixed in absolute time."""

from __future__ import annotations

import numpy as np

from sparksync.core.telemetry.decimate import peak_decimate


def test_each_bin_keeps_its_min_and_max_in_time_order():
    x = np.arange(100.0)  # 100 points, bins of 10 s: 10 bins
    y = np.zeros(100)
    y[13], y[17] = 5.0, -3.0  # in bin 1: max first, then min
    y[55] = 9.0
    xs, ys = peak_decimate(x, y, 10.0)
    assert len(xs) == 20
    assert list(xs[2:4]) == [13.0, 17.0] and list(ys[2:4]) == [5.0, -3.0]
    assert ys.max() == 9.0 and ys.min() == -3.0
    assert np.all(np.diff(xs) >= 0)


def test_a_gap_stays_a_gap_and_sparse_data_is_left_as_it_is():
    x = np.arange(100.0)
    y = np.ones(100)
    y[42] = np.nan
    _, ys = peak_decimate(x, y, 10.0)
    assert np.isnan(ys[8]) and np.isnan(ys[9]) and np.isfinite(ys[:8]).all()
    sparse_x, sparse_y = np.arange(30.0), np.arange(30.0)
    assert peak_decimate(sparse_x, sparse_y, 10.0)[0] is not sparse_x  # 10 points per bin: decimated
    assert peak_decimate(sparse_x, sparse_y, 4.0)[0] is sparse_x  # 4 per bin: drawn as they are
    assert peak_decimate(x, y, 0.0)[0] is x


def test_bins_are_fixed_in_absolute_time_as_the_window_slides():
    x = 1_700_000_000 + np.arange(6000) / 10
    y = np.sin(np.arange(6000) / 7)
    a_x, a_y = peak_decimate(x, y, 1.5)
    b_x, b_y = peak_decimate(x[300:], y[300:], 1.5)  # the window moved on by 30 s
    edge = np.ceil(x[300] / 1.5) * 1.5  # the later window's first whole bin
    assert np.array_equal(a_x[a_x >= edge], b_x[b_x >= edge]) and np.array_equal(a_y[a_x >= edge], b_y[b_x >= edge])
