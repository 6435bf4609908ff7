from __future__ import annotations

import pytest

from sparksync_agent.collectors.memory import MemoryCollector

KIB = 1024


def test_used_is_total_minus_available_in_bytes(tree):
    # GB10-like numbers: 128 GB unified memory, most of it taken by a model.
    tree.meminfo(
        MemTotal=125_000_000,
        MemFree=2_000_000,
        MemAvailable=30_000_000,
        Buffers=100_000,
        Cached=25_000_000,
        SwapCached=0,
        SwapTotal=16_000_000,
        SwapFree=15_000_000,
    )
    sample = MemoryCollector(tree.proc).sample(0.0)
    assert sample.total_bytes == 125_000_000 * KIB
    assert sample.used_bytes == (125_000_000 - 30_000_000) * KIB
    assert sample.available_bytes == 30_000_000 * KIB
    assert sample.free_bytes == 2_000_000 * KIB
    assert sample.cached_bytes == 25_000_000 * KIB  # "SwapCached" must not be mistaken for "Cached"
    assert sample.buffers_bytes == 100_000 * KIB
    assert sample.swap_total_bytes == 16_000_000 * KIB
    assert sample.swap_used_bytes == 1_000_000 * KIB


def test_no_swap_reads_as_zero(tree):
    tree.meminfo(MemTotal=1000, MemFree=500, MemAvailable=800)
    sample = MemoryCollector(tree.proc).sample(0.0)
    assert (sample.swap_total_bytes, sample.swap_used_bytes) == (0, 0)
    assert sample.used_bytes == 200 * KIB


def test_follows_the_file_between_samples(tree):
    collector = MemoryCollector(tree.proc)
    tree.meminfo(MemTotal=1000, MemFree=900, MemAvailable=900)
    first = collector.sample(0.0)
    tree.meminfo(MemTotal=1000, MemFree=100, MemAvailable=150)
    second = collector.sample(1.0)
    assert (first.used_bytes, second.used_bytes) == (100 * KIB, 850 * KIB)


def test_missing_memavailable_says_why(tree):
    tree.meminfo(MemTotal=1000, MemFree=500)
    with pytest.raises(ValueError, match="MemAvailable"):
        MemoryCollector(tree.proc).sample(0.0)
