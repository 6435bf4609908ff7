"""The traffic-split sweep, its history, chart and CSV, and calibrate: against scripted replicas, where the
scores are known by construction (large answers every BFCL case right, small botches the parallel ones)."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.switchyard.errors import EvalError
from sparksync.switchyard.eval.calibrate import choose, write_setting
from sparksync.switchyard.eval.history import SweepHistory
from sparksync.switchyard.eval.report import NO_SCORE
from sparksync.switchyard.eval.suites import load_suite
from sparksync.switchyard.eval.sweep import SweepPoint, SweepReport, SweepSettings, SweepSpec, run_sweep
from sparksync.switchyard.eval.sweep_chart import chart_data, csv_text, write_png
from tests.switchyard.conftest import config_for
from tests.switchyard.suite_answers import bfcl_scripts

CASES = load_suite("bfcl", limit=6)  # simple_0, multiple_0, parallel_0, simple_1, multiple_1, parallel_1
# One stream: the fixed share's counter meets the cases in file order, so the scores are known exactly.
ONE_STREAM = SweepSettings(concurrency=1, max_tokens=16, load_s=1.5, settle_s=0.2)
# Far slower than the machine's noise: the throughput order below is the routing's, not the scheduler's.
LARGE_DELAY_S = 0.3


@pytest.fixture
def pools(fake):
    small, large = bfcl_scripts(CASES, large_delay_s=LARGE_DELAY_S)
    return fake("small", small), fake("large", large)


def test_the_sweep_spec_reads_and_refuses_clearly():
    spec = SweepSpec.parse("large_share=1, 1/2,1/4 ,0")
    assert spec == SweepSpec("large_share", ("1", "1/2", "1/4", "0")) and spec.anchor_value() == "1"
    assert SweepSpec.parse("threshold=0.5,2").anchor_value() is None
    for bad, message in (("share=1", "takes large_share"), ("large_share=", "takes large_share"),
                         ("large_share=2", "not between 0 and 1"), ("threshold=x", "not a number")):  # fmt: skip
        with pytest.raises(EvalError, match=message):
            SweepSpec.parse(bad)
    with pytest.raises(EvalError, match="needs a rules or cascade policy; the config's is fixed_share"):
        SweepSpec.parse("threshold=1").check(config_for(["http://a:1"], ["http://b:1"]))


def test_a_large_share_sweep_scores_and_measures_each_point(pools):
    small, large = pools
    config = config_for([small.url], [large.url], policy={"kind": "fixed_share", "large_share": 1})
    report = run_sweep(config, CASES, SweepSpec.parse("large_share=1,1/2,0"), ONE_STREAM, case_file="bfcl")
    by = {p.setting: p for p in report.points}
    assert [p.label for p in report.points] == ["large_share=1", "large_share=1/2", "large_share=0"]
    assert report.anchor is by["1"]  # the sweep's own all-large point is the anchor: no extra run
    # Requests 2, 4 and 6 go large at 1/2: parallel_0 (request 3) is small's and lost, parallel_1 is not.
    assert by["1"].score == 100 and by["1/2"].score == pytest.approx(500 / 6, abs=0.01)
    assert by["0"].score == pytest.approx(400 / 6, abs=0.01)
    assert by["1"].categories == {"simple": 100, "multiple": 100, "parallel": 100}
    assert by["0"].categories["parallel"] == 0
    # The share that went large under load, as measured from the answers' X-Switchyard-Pool.
    assert by["1"].large_share == 1 and by["0"].large_share == 0 and 0.3 <= by["1/2"].large_share <= 0.7
    assert by["1"].throughput_x == 1 and by["0"].throughput_x > by["1/2"].throughput_x > 1
    for point in report.points:
        assert point.requests > 0 and point.load_errors == 0 and point.score_errors == 0
        assert point.ttft_p50_ms is not None and point.ttft_p99_ms >= point.ttft_p50_ms
    assert by["1"].ttft_p50_ms >= 1000 * LARGE_DELAY_S  # every answer waited for the slow pool
    assert report.summary() == "no setting kept large-only's score (100)"
    # Each point's requests were streamed with the suite's tools.
    assert all(body["stream"] and body["tools"] for body in large.bodies)


def test_a_threshold_sweep_runs_the_large_pool_alone_as_its_anchor(pools):
    small, large = pools
    config = config_for([small.url], [large.url], policy={"kind": "rules", "threshold": 1.0})
    report = run_sweep(config, CASES, SweepSpec.parse("threshold=0,100"), ONE_STREAM)
    assert [p.label for p in report.points] == ["large only", "threshold=0", "threshold=100"]
    anchor, everything_large, nothing_large = report.points
    assert anchor.anchor and anchor.setting is None and anchor.large_share == 1
    # Every request scores at least 0 (all large); none reaches 100 (all small).
    assert everything_large.large_share == 1 and everything_large.score == 100
    assert nothing_large.large_share == 0 and nothing_large.score == pytest.approx(400 / 6, abs=0.01)
    assert report.summary().startswith("best at score parity: threshold=0, ")


def test_sweeps_are_stored_listed_shown_and_exported(pools, tmp_path):
    small, large = pools
    config_path = tmp_path / "switchyard.json"
    config_path.write_text(config_for([small.url], [large.url], policy={"kind": "fixed_share", "large_share": 1})
                           .model_dump_json(exclude_defaults=True))  # fmt: skip
    png, csv_path = tmp_path / "sweep.png", tmp_path / "sweep.csv"
    runner = CliRunner()
    ran = runner.invoke(cli, ["switchyard", "eval", "--suite", "bfcl", "--limit", "6", "--config", str(config_path),
                              "--sweep", "large_share=1,1/2,0", "--concurrency", "1", "--max-tokens", "16",
                              "--load-s", "1.5", "--png", str(png), "--csv", str(csv_path)])  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert "large_share=1 *" in ran.stdout and "no setting kept large-only's score (100)" in ran.stdout
    assert "stored as sweep 1 (sparksync switchyard show-sweep 1)" in ran.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.reader(csv_path.read_text().splitlines()))
    assert rows[0][:6] == ["source", "point", "setting", "anchor", "score", "throughput_x"]
    assert [r[1] for r in rows[1:]] == ["large_share=1", "large_share=1/2", "large_share=0",
                                        "published: 1.5x at 1/2 large", "published: 3.0x at 1/4 large"]
    (item,) = SweepHistory().list_sweeps()
    assert item.parameter == "large_share" and item.settings == "1, 1/2, 0" and item.anchor_score == 100
    assert item.case_file.startswith("BFCL (bfcl-eval ") and item.best_x is None
    listed = runner.invoke(cli, ["switchyard", "sweeps"])
    assert listed.exit_code == 0 and "large_share=1,1/2,0" in listed.stdout.splitlines()[1]
    shown = runner.invoke(cli, ["switchyard", "show-sweep", "1", "--csv", str(tmp_path / "again.csv")])
    assert shown.exit_code == 0 and "large_share=1/2" in shown.stdout
    assert (tmp_path / "again.csv").read_text() == csv_path.read_text()
    assert runner.invoke(cli, ["switchyard", "show-sweep", "7"]).exit_code == 25


def point(setting: str | None, score: float, share: float | None, x: float, anchor: bool = False) -> SweepPoint:
    label = "large only" if setting is None else f"large_share={setting}"
    return SweepPoint(label=label, setting=setting, anchor=anchor, score=score, cases=92, score_errors=0,
                      output_tokens_per_s=100 * x, throughput_x=x, large_share=share)  # fmt: skip


def report_of(*points: SweepPoint) -> SweepReport:
    return SweepReport(case_file="c", cases=92, policy="fixed_share", parameter="large_share", concurrency=16,
                       max_tokens=256, load_s=60, points=list(points))  # fmt: skip


def test_calibrate_chooses_the_smallest_large_share_that_keeps_the_score():
    report = report_of(point("1", 91, 1.0, 1.0, anchor=True), point("1/2", 91, 0.5, 1.5), point("1/4", 90.2, 0.25, 3.0),
                       point("1/8", 84, 0.125, 4.1), point("0", 70, 0.0, 5.0))  # fmt: skip
    assert choose(report, tolerance=1).setting == "1/4"  # 90.2 is within a point of 91
    assert choose(report, tolerance=0).setting == "1/2"
    assert choose(report, tolerance=30).setting == "0"
    assert report.summary() == "best at score parity: large_share=1/2, 1.50x throughput (91 against 91)"
    data = chart_data(report)
    assert data.parity_score == 91 and data.anchor.x == 1
    assert [(m.x, m.y) for m in data.published] == [(1.5, 91), (3.0, 91)]  # the published points, at parity
    assert "published,published: 3.0x at 1/4 large,1/4,0,91,3.0" in csv_text(report)


def test_calibrate_refuses_without_a_score_to_keep(tmp_path):
    report = report_of(point("1", 0, 1.0, 1.0, anchor=True), point("1/4", 0, 0.25, 3.0))
    assert report.summary().startswith(NO_SCORE) and report.best() is None
    with pytest.raises(EvalError, match="no score: the models answered no case correctly"):
        choose(report)
    write_png(report, tmp_path / "none.png")  # a chart still draws, and says why there is no score
    assert "no score" in chart_data(report).title


def test_the_chosen_setting_goes_into_a_toml_config_keeping_its_comments(tmp_path):
    path = tmp_path / "switchyard.toml"
    path.write_text('# our gateway\n[pools.small]\nurls = ["http://a:1"]  # the small one\n[pools.large]\n'
                    'urls = ["http://b:1"]\n\n[policy]\nkind = "fixed_share"  # calibrated below\nsmall = "small"\n'
                    'large = "large"\nlarge_share = "1"\n')  # fmt: skip
    path.chmod(0o640)
    write_setting(path, "large_share", "1/4")
    text = path.read_text()
    assert 'large_share = "1/4"' in text and "# the small one" in text and "# calibrated below" in text
    assert path.stat().st_mode & 0o777 == 0o640
    as_json = tmp_path / "switchyard.json"
    as_json.write_text(json.dumps({"pools": {"s": {"urls": ["http://a:1"]}, "l": {"urls": ["http://b:1"]}},
                                   "policy": {"kind": "rules", "small": "s", "large": "l"}}))  # fmt: skip
    write_setting(as_json, "threshold", "2")
    assert json.loads(as_json.read_text())["policy"]["threshold"] == 2.0


def test_cli_calibrate_sweeps_and_writes_the_setting(pools, tmp_path):
    small, large = pools
    path = tmp_path / "switchyard.toml"
    path.write_text(f'[pools.small]\nurls = ["{small.url}"]\n[pools.large]\nurls = ["{large.url}"]\n[policy]\n'
                    'kind = "rules"  # routed by difficulty\nsmall = "small"\nlarge = "large"\nthreshold = 1.0\n')  # fmt: skip
    args = ["switchyard", "calibrate", "--suite", "bfcl", "--limit", "6", "--config", str(path), "--values", "0,100",
            "--concurrency", "1", "--max-tokens", "16", "--load-s", "1.5", "--tolerance", "0"]  # fmt: skip
    dry = CliRunner().invoke(cli, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would set policy.threshold = 0: score 100.0 (large-only 100.0), 100% of requests large" in dry.stdout
    assert "threshold = 1.0" in path.read_text()
    ran = CliRunner().invoke(cli, args)
    assert ran.exit_code == 0, ran.output
    assert "threshold = 0.0" in path.read_text() and "# routed by difficulty" in path.read_text()
    assert len(SweepHistory().list_sweeps()) == 2  # each calibration's sweep is kept
