"""Figures that should not be believed as they stand are flagged, with the reason and what to do."""

from __future__ import annotations

import csv
import io

from sparksync.core.bench.exports import export_text
from sparksync.core.bench.flags import efficiency_flag, run_flags, spread_flag
from sparksync.core.bench.report import scaling_report
from tests.core.bench.records import inference_run


def test_efficiency_above_105_percent_is_flagged_and_up_to_it_is_not():
    assert efficiency_flag(1.05, 2) is None and efficiency_flag(0.974, 8) is None
    flag = efficiency_flag(3.388, 2)
    assert flag is not None and flag.kind == "efficiency_above_100"
    assert "338.8%" in flag.reason and "re-measure the one-node baseline" in flag.action


def test_a_wide_spread_is_flagged_by_its_coefficient_of_variation():
    # The stored tg pair 10,879 and 492 tok/s: mean 5,685.5, std 7,344.8 (sample): CV 129 %.
    flag = spread_flag(5685.5, 7344.8, "decode tok/s")
    assert flag is not None and "CV 129%" in flag.reason and "more repetitions" in flag.action
    assert spread_flag(100.0, 10.0, "decode tok/s") is None  # 10 % exactly is the limit, not above it


def test_a_scaling_report_flags_a_too_slow_baseline_an_older_engine_and_a_wide_spread():
    base = inference_run(1, 10.0, 1000.0, engine_version="b4000", nodes=("spark-1",)).model_copy(update={"id": 1})
    two = inference_run(2, 23.0, 1500.0, minutes=5, engine_version="b5000",
                        nodes=("spark-1", "spark-2")).model_copy(update={"id": 2})
    tg = two.result["benchmarks"][0]["tg_throughput"]
    tg.update(mean=23.0, std=5.0, values=[19.5, 26.5])  # CV 22 %
    report = scaling_report([base, two])
    kinds = [f.kind for f in report.rows[1].flags]
    assert kinds == ["efficiency_above_100", "stale_baseline", "large_spread"]
    assert report.rows[0].flags == []
    stale = report.rows[1].flags[1]
    assert "engine version b4000 then, b5000 now" in stale.reason
    # Every face reads the report's notes and columns: Markdown (CLI, app), CSV (exports).
    md = export_text(report, "md")
    assert "2 node(s), run 2: flagged: scaling efficiency 115.0% on 2 nodes is above 105%" in md
    assert "re-measure the one-node baseline with the software and nodes of this run" in md
    [_, row] = list(csv.DictReader(io.StringIO(export_text(report, "csv"))))
    assert "above 105%" in row["flags"] and "CV 22%" in row["flags"] and row["tok/s std"] == "5.0"


def test_a_single_run_whose_repetitions_disagree_says_so_in_its_table():
    run = inference_run(1, 5685.5, 1000.0).model_copy(update={"id": 7})
    run.result["benchmarks"][0]["tg_throughput"].update(mean=5685.5, std=7344.8, values=[10879.0, 492.0])
    assert [f.kind for f in run_flags(run)] == ["large_spread"]
    assert "flagged: decode tok/s [pp8192 tg256 c1] spreads widely" in export_text(run, "md")
