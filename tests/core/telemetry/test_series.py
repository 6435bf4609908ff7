import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparksync.core.telemetry.series import SeriesBuffer


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


def test_a_new_column_is_a_gap_in_older_rows():
    buf = SeriesBuffer(4, ["t"])
    buf.append({"t": 1.0})
    buf.add_column("v")
    buf.append({"t": 2.0, "v": 5.0})
    assert "v" in buf and buf.columns == ("t", "v")
    assert math.isnan(buf.column("v")[0]) and buf.column("v")[1] == 5.0
    buf.add_column("v")  # adding twice changes nothing
    assert buf.columns == ("t", "v")


@given(
    st.integers(1, 20),
    st.lists(st.lists(st.floats(-1e6, 1e6), max_size=30), max_size=6),
)
def test_extend_matches_appending_row_by_row(capacity, chunks):
    by_rows, by_blocks = SeriesBuffer(capacity, ["x", "y"]), SeriesBuffer(capacity, ["x", "y"])
    for chunk in chunks:
        for x in chunk:
            by_rows.append({"x": x, "y": -x})
        by_blocks.extend({"x": np.array(chunk), "y": -np.array(chunk, dtype=float)})
    for name in ("x", "y"):
        np.testing.assert_array_equal(by_blocks.column(name), by_rows.column(name))


def test_extend_leaves_unnamed_columns_as_gaps():
    buf = SeriesBuffer(4, ["t", "v"])
    buf.extend({"t": np.array([1.0, 2.0])})
    assert buf.column("t").tolist() == [1.0, 2.0] and np.isnan(buf.column("v")).all()
    with pytest.raises(ValueError, match="one length"):
        buf.extend({"t": np.array([3.0]), "v": np.array([1.0, 2.0])})
