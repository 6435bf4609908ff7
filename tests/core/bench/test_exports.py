"""Exports: CSV for tools, Markdown for people, JSON for everything, PNG charts."""

from __future__ import annotations

import csv
import io
import json
import struct

import pytest

from sparksync.core.bench.errors import BenchInputError
from sparksync.core.bench.exports import export_file, export_text
from sparksync.core.bench.record import RunRecord
from sparksync.core.bench.report import ScalingReport, compare_runs, scaling_report
from tests.core.bench.records import inference_run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def runs():
    return [inference_run(n, tps, pre, topology="switch").model_copy(update={"id": i})
            for i, (n, tps, pre) in enumerate([(1, 11.86, 1000.0), (2, 21.0, 1300.0), (8, 52.58, 1940.0)], 1)]


def test_scaling_csv_has_plain_numbers_for_tools(runs):
    rows = list(csv.DictReader(io.StringIO(export_text(scaling_report(runs), "csv"))))
    assert float(rows[2]["tok/s std"]) == 0.5258 and float(rows[2]["prefill std"]) == 19.4  # std over runs
    assert rows[2]["flags"] == ""
    assert [r["nodes"] for r in rows] == ["1", "2", "8"]
    assert float(rows[2]["decode tok/s"]) == 52.58
    assert float(rows[2]["speed-up"]) == round(52.58 / 11.86, 4)
    assert float(rows[2]["efficiency"]) == round(52.58 / 11.86 / 8, 4)
    assert rows[0]["backend"] == ""  # unknown is empty, not "None"


def test_scaling_markdown_is_rounded_and_carries_notes(runs):
    text = export_text(scaling_report(runs), "md")
    row = ("| 8 | 3 | complete | switch | — | 52.58 | 0.53 | 1,940.00 | 19.40 | 100.00 | 4.43x | 1.94x | 55.4% | 24.2% "
           "| — | — | — | — | — | — |")
    assert row in text
    assert "- efficiency = tok/s(N) / (N x tok/s(1))" in text
    assert "Published (Qwen3.8-27B-NVFP4" in text


def test_json_export_round_trips(runs):
    report = scaling_report(runs)
    assert ScalingReport.model_validate_json(export_text(report, "json")) == report
    run_json = json.loads(export_text(runs[0], "json"))
    assert run_json["result"]["benchmarks"][0]["tg_throughput"]["mean"] == 11.86  # llama-benchy's JSON, whole
    assert RunRecord.model_validate(run_json) == runs[0]


def test_run_and_comparison_exports(runs):
    run_csv = list(csv.DictReader(io.StringIO(export_text(runs[2], "csv"))))
    assert run_csv == [{"pp": "8192", "tg": "256", "depth": "0", "concurrency": "1", "decode tok/s": "52.58",
                        "decode std": "0.5258", "decode bound": "", "decode % of bound": "",
                        "prefill tok/s": "1940.0", "prefill std": "19.4", "prefill bound": "",
                        "prefill % of bound": "",
                        "TTFT ms": "100.0", "peak tok/s": "53.6316"}]
    md = export_text(compare_runs(runs[0], runs[2]), "md")
    assert "| decode tok/s | 11.86 | 52.58 | 4.43x |" in md


def test_png_is_a_real_chart(runs, tmp_path):
    from PIL import Image

    for name, subject in (("scaling", scaling_report(runs)), ("run", runs[0]),
                          ("compare", compare_runs(runs[0], runs[2]))):
        path = export_file(subject, "png", tmp_path / f"{name}.png")
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE)
        width, height = struct.unpack(">II", data[16:24])
        assert (width, height) == (1100, 462)  # 10 x 4.2 inches at 110 dpi
        colours = Image.open(path).convert("RGB").getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 50, f"{name}.png is nearly blank"


def test_png_has_no_text_form(runs):
    with pytest.raises(BenchInputError, match="png writes a file"):
        export_text(runs[0], "png")


def test_png_charts_show_the_std_as_error_bars_and_the_bound_as_a_named_line(runs, tmp_path):
    from matplotlib.container import BarContainer

    from sparksync.core.bench.bounds import run_bounds
    from sparksync.core.bench.chart import BOUND_LABEL, draw
    from tests.core.test_planner_bounds import QWEN_27B

    def bounded(record):
        bounds = run_bounds(QWEN_27B, record.profile, record.context.cluster_size)
        summary = record.summary.model_copy(update={"decode_bound_tps": bounds.headline.decode_tps,
                                                    "prefill_bound_tps": bounds.headline.prefill_tps})
        return record.model_copy(update={"bounds": bounds, "summary": summary})

    report = scaling_report([bounded(r) for r in runs])
    decode_axes = draw(report).axes[0]
    [bars] = [c for c in decode_axes.containers if isinstance(c, BarContainer)]
    assert bars.errorbar is not None  # matplotlib keeps the error bars of a bar() with yerr
    _, caps, (segments,) = bars.errorbar.lines
    spans = [seg[1][1] - seg[0][1] for seg in segments.get_segments()]
    assert spans == pytest.approx([2 * r.throughput_std for r in report.rows])  # ± one std
    [bound] = [line for line in decode_axes.get_lines() if line.get_label().startswith(BOUND_LABEL)]
    assert list(bound.get_ydata()) == pytest.approx([r.decode_bound_tps for r in report.rows])
    assert "TP×8" in bound.get_label() and "1 node" in bound.get_label()
    run_axes = draw(bounded(runs[2])).axes
    assert all(any(line.get_label().startswith(BOUND_LABEL) for line in a.get_lines()) for a in run_axes)
    assert export_file(report, "png", tmp_path / "scaling.png").read_bytes().startswith(PNG_SIGNATURE)
