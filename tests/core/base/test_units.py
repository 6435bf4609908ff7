import math

import pytest

from sparksync.core.base.units import (
    MemoryUnit,
    bits_per_s,
    format_bandwidth,
    format_bytes,
    format_link_rate,
    format_memory,
    format_tokens_per_s,
    format_value,
    to_memory_unit,
)


def test_cluster_capacity_is_computed_not_rounded_to_marketing():
    assert format_bytes(8 * 128e9) == "1.02 TB"  # 8 × 128 GB
    assert format_bytes(8 * 128 * 2**30, MemoryUnit.GIB) == "1 TiB"  # 8 × 128 GiB
    assert format_bytes(4 * 64e9) == "256 GB"  # a 64 GB variant: never assume 128


@pytest.mark.parametrize(
    ("n_bytes", "unit", "text"),
    [
        (128e9, MemoryUnit.GB, "128 GB"),
        (128e9, MemoryUnit.GIB, "119 GiB"),
        (25.3e9, MemoryUnit.GB, "25.3 GB"),
        (1.5 * 2**30, MemoryUnit.GIB, "1.5 GiB"),
    ],
)
def test_memory_is_named_as_the_unit_it_is_in(n_bytes, unit, text):
    assert format_memory(n_bytes, unit) == text
    assert format_memory(n_bytes, unit).endswith(" " + unit.value)


def test_gb_and_gib_are_different_sizes():
    assert to_memory_unit(2**30, MemoryUnit.GIB) == 1.0
    assert to_memory_unit(1e9, MemoryUnit.GB) == 1.0
    assert MemoryUnit.GB.explained.startswith("GB") and MemoryUnit.GIB.explained.startswith("GiB")


def test_links_are_bits_per_second():
    assert bits_per_s(25e9) == 200e9
    assert format_link_rate(25e9) == "200 Gb/s"  # one ConnectX-7 port at line rate
    assert format_link_rate(1.25e9) == "10 Gb/s"
    assert format_link_rate(1250) == "10 kb/s"
    assert format_link_rate(0) == "0 b/s"


def test_memory_bandwidth_is_bytes_per_second():
    assert format_bandwidth(273e9) == "273 GB/s"


def test_tokens_per_second():
    assert format_tokens_per_s(52.58) == "52.6 tok/s"
    assert format_tokens_per_s(68_079) == "68079 tok/s"


def test_rounding_up_moves_to_the_next_prefix():
    assert format_bytes(999.96e9) == "1 TB"


def test_missing_values_show_a_dash_not_zero():
    assert format_bytes(math.nan) == "— B"


@pytest.mark.parametrize(
    ("value", "unit", "memory_unit", "text"),
    [
        (64e9, "B", MemoryUnit.GB, "64 GB"),
        (64 * 2**30, "B", MemoryUnit.GIB, "64 GiB"),
        (200e9, "bit/s", MemoryUnit.GB, "200 Gb/s"),
        (11.86, "tok/s", MemoryUnit.GB, "11.9 tok/s"),
        (55.0, "°C", MemoryUnit.GB, "55 °C"),
        (80.5, "%", MemoryUnit.GB, "80.5 %"),
    ],
)
def test_a_series_value_reads_in_its_unit(value, unit, memory_unit, text):
    assert format_value(value, unit, memory_unit) == text
