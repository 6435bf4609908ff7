import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparksync.core.series import SeriesBuffer


def test_keeps_the_newest_rows_in_order():
    buf = SeriesBuffer(3, ["t", "v"])
    for i in range(5):
        buf.append({"t": i, "v": 10 * i})
    assert len(buf) == 3
    assert buf.column("t").tolist() == [2, 3, 4]
    assert buf.column("v").tolist() == [20, 30, 40]


def test_missing_value_is_a_gap_not_zero():
    buf = SeriesBuffer(4, ["t", "v"])
    buf.append({"t": 1})
    assert math.isnan(buf.column("v")[0])


def test_columns_are_read_only_views():
    buf = SeriesBuffer(4, ["t"])
    buf.append({"t": 1})
    with pytest.raises(ValueError):
        buf.column("t")[0] = 5


def test_since_selects_a_time_window():
    buf = SeriesBuffer(10, ["t"])
    for i in range(8):
        buf.append({"t": float(i)})
    window = buf.since("t", 5.0)
    assert buf.column("t")[window].tolist() == [5.0, 6.0, 7.0]


def test_version_moves_on_every_change():
    buf = SeriesBuffer(2, ["t"])
    v0 = buf.version
    buf.append({"t": 1})
    assert buf.version == v0 + 1
    buf.clear()
    assert len(buf) == 0 and buf.version == v0 + 2


def test_rejects_empty_shapes():
    with pytest.raises(ValueError):
        SeriesBuffer(0, ["t"])
    with pytest.raises(ValueError):
        SeriesBuffer(3, [])


@given(st.integers(1, 50), st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), max_size=200))
def test_matches_a_plain_list(capacity, values):
    buf = SeriesBuffer(capacity, ["x"])
    for x in values:
        buf.append({"x": x})
    np.testing.assert_array_equal(buf.column("x"), np.array(values[-capacity:] if values else [], dtype=float))
