"""The planner's bound beside every benchmark figure, with hand-computed expectations.

The published 27 B model (Qwen3.8-27B-NVFP4) with the shape docs/planner.md
assumes (64 layers, 8 KV heads of 128, hidden 5120, 64 query heads):

* weights: 27e9 x 0.5625 B = 15.1875 GB;
* KV cache per token: 64 x 8 x 128 x 2 (K and V) x 2 B = 262,144 B. The
  published profile decodes 256 tokens after 8,192, so the mean cache over
  the decode is 8,192 + 128 = 8,320 tokens: 2.1810 GB;
* 1 node: (15.1875 + 2.1810) GB / 273 GB/s = 63.621 ms -> 15.718 tok/s, and
  the measured 11.86 is 75.5 % of it;
* 8 nodes: memory 17.3685 GB / 8 / 273 GB/s = 7.9526 ms; fabric 2 x 64
  all-reduces of 5120 x 2 B, each 20 us + 2 x 7/8 x 10,240 B / 25 GB/s =
  20.717 us, so 2.6518 ms; step 10.6044 ms -> 94.30 tok/s, and the measured
  52.58 is 55.8 % of it.
"""

from __future__ import annotations

import csv
import io

import pytest

from sparksync.core.bench.bounds import find_model_spec, percent, run_bounds
from sparksync.core.bench.exports import export_text
from sparksync.core.bench.profile import BenchProfile
from sparksync.core.bench.report import compare_runs, scaling_report
from sparksync.core.planner.bounds import Hardware
from sparksync.core.planner.errors import ModelFileError
from sparksync.core.planner.model import ModelSpec
from tests.core.bench.records import inference_run
from tests.engines.tinymodel import SMALL, write_tiny_model

QWEN_27B = ModelSpec(name="Qwen3.8-27B-NVFP4", params=27e9, quant="nvfp4", layers=64, kv_heads=8, head_dim=128,
                     hidden=5120, attention_heads=64)


def with_bounds(record, model=QWEN_27B):
    bounds = run_bounds(model, record.profile, record.context.cluster_size)
    summary = record.summary.model_copy(update={"decode_bound_tps": bounds.headline.decode_tps,
                                                "prefill_bound_tps": bounds.headline.prefill_tps})
    return record.model_copy(update={"bounds": bounds, "summary": summary})


def test_the_published_profile_on_one_node_matches_the_hand_computation():
    bounds = run_bounds(QWEN_27B, BenchProfile.published(), nodes=1)
    (test,) = bounds.tests
    assert test.key == (8192, 256, 0, 1)
    assert test.decode_tps == pytest.approx(1 / ((15.1875e9 + 262_144 * 8320) / 273e9), rel=1e-9)
    assert test.decode_tps == pytest.approx(15.718, abs=1e-3)
    assert percent(11.86, test.decode_tps) == pytest.approx(75.45, abs=0.01)
    assert bounds.notes == []


def test_eight_nodes_add_the_fabric_and_match_the_hand_computation():
    (test,) = run_bounds(QWEN_27B, BenchProfile.published(), nodes=8).tests
    memory = (15.1875e9 + 262_144 * 8320) / 8 / 273e9
    fabric = 128 * (20e-6 + 2 * 7 / 8 * 10_240 / 25e9)
    assert test.decode_tps == pytest.approx(1 / (memory + fabric), rel=1e-9)
    assert test.decode_tps == pytest.approx(94.30, abs=0.01)
    assert percent(52.58, test.decode_tps) == pytest.approx(55.76, abs=0.01)


def test_every_test_of_a_custom_profile_gets_its_own_bound():
    profile = BenchProfile.build(pp=(512, 2048), tg=(128,), depth=(0, 4096), concurrency=(1, 4))
    bounds = run_bounds(QWEN_27B, profile, nodes=1)
    assert len(bounds.tests) == 8
    c1, c4 = bounds.for_test((512, 128, 0, 1)), bounds.for_test((512, 128, 0, 4))
    # Four streams share one read of the weights: more tokens/s in all, never 4x (each has its own cache).
    assert c1.decode_tps < c4.decode_tps < 4 * c1.decode_tps
    # Deeper context means more cache to read per token.
    assert bounds.for_test((512, 128, 4096, 1)).decode_tps < c1.decode_tps


def test_a_faster_memory_raises_the_bound_in_proportion():
    slow = run_bounds(QWEN_27B, BenchProfile.published(), 1, Hardware(memory_bandwidth_gbs=273))
    fast = run_bounds(QWEN_27B, BenchProfile.published(), 1, Hardware(memory_bandwidth_gbs=546))
    assert fast.headline.decode_tps == pytest.approx(2 * slow.headline.decode_tps)


def test_without_the_shape_the_bound_stays_an_upper_bound_and_says_so():
    bare = ModelSpec(params=27e9, quant="nvfp4")
    one, eight = (run_bounds(bare, BenchProfile.published(), n) for n in (1, 8))
    assert one.headline.decode_tps == pytest.approx(273e9 / 15.1875e9)  # weights only
    assert eight.headline.decode_tps == pytest.approx(8 * 273e9 / 15.1875e9, rel=1e-6)  # fabric (next to) free
    assert any("KV-cache reads are not counted" in n for n in eight.notes)
    assert any("fabric's cost is not counted" in n for n in eight.notes)


def test_percent_is_none_when_a_figure_is_missing():
    assert percent(None, 10.0) is None and percent(5.0, None) is None and percent(5.0, 0.0) is None
    assert percent(5.0, 10.0) == 50.0


def test_a_run_export_shows_each_figure_beside_its_bound():
    record = with_bounds(inference_run(1, 11.86, 1500.0).model_copy(update={"id": 7}))
    (row,) = csv.DictReader(io.StringIO(export_text(record, "csv")))
    assert float(row["decode bound"]) == pytest.approx(15.718, abs=1e-3)
    assert float(row["decode % of bound"]) == pytest.approx(75.45, abs=0.01)
    md = export_text(record, "md")
    assert "| decode % of bound | 75.5 % |" in md
    assert "bounds (planner, docs/planner.md): Qwen3.8-27B-NVFP4" in md and "273 GB/s" in md


def test_scaling_and_comparison_carry_the_percentages():
    one = with_bounds(inference_run(1, 11.86, 1000.0).model_copy(update={"id": 1}))
    eight = with_bounds(inference_run(8, 52.58, 1940.0).model_copy(update={"id": 2}))
    report = scaling_report([one, eight])
    assert [round(r.decode_percent_of_bound, 1) for r in report.rows] == [75.5, 55.8]
    assert "| decode % of bound | 75.5 % | 55.8 % | 0.74x |" in export_text(compare_runs(one, eight), "md")


def test_the_model_file_given_is_read_and_a_bad_one_refused(tmp_path):
    model = write_tiny_model(tmp_path / "m", SMALL)
    spec, note = find_model_spec(model.gguf, tmp_path / "tok.json", None, "http://10.0.0.2:8080/v1")
    assert spec.layers == SMALL.n_layer and spec.quant == "fp32" and note is None
    with pytest.raises(ModelFileError):
        find_model_spec(tmp_path / "tok.json", tmp_path / "tok.json", None, "http://127.0.0.1:8080/v1")


def test_a_local_servers_model_path_is_read_but_a_remote_ones_is_not(tmp_path):
    model = write_tiny_model(tmp_path / "m", SMALL)
    tokenizer = tmp_path / "elsewhere" / "tokenizer.json"
    local, _ = find_model_spec(None, tokenizer, str(model.gguf), "http://127.0.0.1:8080/v1")
    assert local is not None and local.source == str(model.gguf)
    # A remote server's path names a file on that machine, not this one.
    remote, note = find_model_spec(None, tokenizer, str(model.gguf), "http://10.0.0.2:8080/v1")
    assert remote is None and "--model-file" in note


def test_the_tokenizers_folder_may_hold_the_model(tmp_path):
    model = write_tiny_model(tmp_path / "m", SMALL)
    spec, _ = find_model_spec(None, model.tokenizer_json, None, "http://10.0.0.2:8080/v1")
    assert spec is not None and spec.layers == SMALL.n_layer


def test_the_scaling_chart_draws_the_bounds(tmp_path):
    from sparksync.core.bench.exports import export_file

    runs = [with_bounds(inference_run(n, tps, pre).model_copy(update={"id": n}))
            for n, tps, pre in ((1, 11.86, 1000.0), (8, 52.58, 1940.0))]
    path = export_file(scaling_report(runs), "png", tmp_path / "scaling.png")
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and path.stat().st_size > 10_000
