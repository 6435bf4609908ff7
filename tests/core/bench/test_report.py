"""Scaling reports and comparisons, checked against the published figures worked by hand."""

from __future__ import annotations

import pytest

from sparksync.core.bench.context import RunContext
from sparksync.core.bench.errors import BenchInputError
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.recording import training_record
from sparksync.core.bench.report import compare_runs, efficiency, scaling_report, speedup
from tests.core.bench.records import inference_run


def stored(record, run_id):
    return record.model_copy(update={"id": run_id})


def test_the_published_inference_scaling_comes_out_as_published():
    # 11.86 -> 52.58 tok/s decode on 1 -> 8 nodes is 4.43x; prefill 1.94x (a 1,000 tok/s base stands in).
    report = scaling_report([stored(inference_run(1, 11.86, 1000.0, ttft=8000.0), 1),
                             stored(inference_run(8, 52.58, 1940.0, ttft=4200.0, topology="switch"), 2)])
    one, eight = report.rows
    assert (one.speedup, one.efficiency) == (1.0, 1.0)
    assert round(eight.speedup, 2) == 4.43  # 52.58 / 11.86 = 4.4334
    assert round(eight.efficiency, 4) == 0.5542  # 4.4334 / 8
    assert round(eight.prefill_speedup, 2) == 1.94 and round(eight.prefill_efficiency, 4) == 0.2425
    assert eight.ttft_ms == 4200.0 and eight.topology == "switch"
    assert report.baseline_size == 1 and "4.43x decode, 1.94x prefill" in report.reference


def test_training_scaling_matches_the_published_efficiency():
    # nanochat: about 8,740 tok/s on 1 node, 68,079 on 8: 7.79x, 97.4 % efficiency.
    runs = [stored(training_record("nanochat", tps, RunContext(cluster_size=n)), i)
            for i, (n, tps) in enumerate([(1, 8740.0), (8, 68079.0)], start=1)]
    eight = scaling_report(runs).rows[1]
    assert round(eight.speedup, 2) == 7.79 and round(eight.efficiency, 3) == 0.974
    assert eight.prefill_speedup is None


def test_efficiency_is_throughput_over_n_times_the_baseline():
    assert efficiency(300.0, 100.0, 4) == 0.75
    assert speedup(300.0, None) is None and efficiency(None, 100.0, 2) is None


def test_without_a_one_node_run_there_is_no_scaling_but_a_note():
    report = scaling_report([stored(inference_run(2, 20.0, 1500.0), 1),
                             stored(inference_run(4, 35.0, 1700.0), 2)])
    assert [r.speedup for r in report.rows] == [None, None]
    assert any("no 1-node run" in note for note in report.notes)


def test_per_size_a_complete_run_wins_over_a_newer_partial_one():
    runs = [stored(inference_run(1, 10.0, 1000.0), 1),
            stored(inference_run(2, 18.0, 1500.0, minutes=1), 2),
            stored(inference_run(2, 19.0, 1500.0, minutes=2), 3),
            stored(inference_run(2, 25.0, 1500.0, minutes=3, status="partial"), 4),
            stored(inference_run(4, 1.0, 1.0, status="failed"), 5)]
    report = scaling_report(runs)
    assert [(r.cluster_size, r.run_id) for r in report.rows] == [(1, 1), (2, 3)]
    assert "run 5 left out: it has no figures (failed)" in report.notes
    assert "run 2 left out: run 3 is used for 2 node(s)" in report.notes


def test_a_report_covers_one_model_and_one_profile():
    with pytest.raises(BenchInputError, match="a report covers one model and kind"):
        scaling_report([stored(inference_run(1, 10.0, 1.0), 1),
                        stored(inference_run(2, 10.0, 1.0, model="glm"), 2)])
    custom = BenchProfile.build(pp=(512,), tg=(64,))
    with pytest.raises(BenchInputError, match="used different profiles"):
        scaling_report([stored(inference_run(1, 10.0, 1.0), 1),
                        stored(inference_run(2, 10.0, 1.0, profile=custom), 2)])
    with pytest.raises(BenchInputError, match="at least one stored run"):
        scaling_report([])


def test_a_custom_profile_has_no_published_reference():
    custom = BenchProfile.build(pp=(512,), tg=(64,))
    assert scaling_report([stored(inference_run(1, 10.0, 1.0, profile=custom), 1)]).reference is None


def test_compare_puts_nccl_beside_roceante_with_ratios():
    nccl = stored(inference_run(8, 36.17, 1800.0, topology="switch", collective_backend="nccl"), 1)
    roce = stored(inference_run(8, 52.58, 1940.0, topology="switch", collective_backend="roceante"), 2)
    comparison = compare_runs(nccl, roce)
    lines = {line.metric: line for line in comparison.lines}
    assert (lines["collective backend"].a, lines["collective backend"].b) == ("nccl", "roceante")
    assert round(lines["decode tok/s"].ratio, 3) == round(52.58 / 36.17, 3)
    assert lines["decode tok/s [pp8192 tg256 c1]"].b == 52.58
    assert "training tok/s" not in lines  # neither run has it
    assert comparison.notes == []


def test_compare_notes_different_models_and_profiles():
    custom = BenchProfile.build(pp=(512,), tg=(64,))
    comparison = compare_runs(stored(inference_run(1, 10.0, 1.0), 1),
                              stored(inference_run(1, 10.0, 1.0, model="glm", profile=custom), 2))
    assert len(comparison.notes) == 2
    assert not any(line.metric.startswith("decode tok/s [") for line in comparison.lines)
