"""Benchmark fixtures: durations (scaled by $SPARKSYNC_PERF_SCALE) and where results go."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.perf.report import OUT_ENV, results_dir
from tests.perf.settings import Durations, scale_from_env

_HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def durations() -> Durations:
    try:
        return Durations(scale_from_env())
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture(scope="session")
def perf_out(tmp_path_factory, durations) -> Path:
    out = results_dir(tmp_path_factory.getbasetemp() / "perf-results")
    print(f"\nbenchmark figures go to {out} (set ${OUT_ENV} to choose); scale {durations.scale:g}")
    return out


def pytest_collection_modifyitems(config, items):
    """Every test under tests/perf is a benchmark: refuse one without the perf marker,
    or 'make test' would run a multi-minute measurement."""
    for item in items:
        if _HERE in Path(str(item.fspath)).parents and item.get_closest_marker("perf") is None:
            raise pytest.UsageError(f"{item.nodeid} is under tests/perf but lacks @pytest.mark.perf")
